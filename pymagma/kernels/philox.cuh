// Philox4x32-10 keyed by a 64-bit seed, counter (pair index j, 64-bit offset): each counter gives four 32-bit
// words -> two 53-bit uniforms in (0, 1] (pm_pair).  The stream of random.cu's uniform and normal numbers; any
// registered program may include this header to draw on the same stream, which the host can reproduce exactly.
#pragma once
#include "common.cuh"

__device__ __forceinline__ void pm_philox(u32 c[4], u32 k0, u32 k1) {
    for (int round = 0; round < 10; ++round) {
        u32 hi0 = __umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
        u32 hi1 = __umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
        u32 n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0; c[1] = lo1; c[2] = n2; c[3] = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

// A double in (0, 1] from two words: 53 random bits offset by half a step (the top value rounds up to 1.0, with
// probability 2^-53); narrower output types can round to either end.
__device__ __forceinline__ double pm_unit(u32 hi, u32 lo) {
    u64 bits = ((u64)(hi >> 5) << 26) | (u64)(lo >> 6);
    return ((double)bits + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ void pm_pair(u64 seed, u64 offset, u64 j, double& u0, double& u1) {
    u32 c[4] = {(u32)j, (u32)(j >> 32), (u32)offset, (u32)(offset >> 32)};
    pm_philox(c, (u32)seed, (u32)(seed >> 32));
    u0 = pm_unit(c[0], c[1]);
    u1 = pm_unit(c[2], c[3]);
}
