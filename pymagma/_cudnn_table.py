"""cuDNN 9's prototype table (name -> restype, argtypes) and the algorithm-performance structure its queries fill:
what :mod:`pymagma._cudnn` binds lazily and the simulator's seam test checks.  Only the legacy ("v7-style") API that
cuDNN 9 still ships is declared."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_double, c_float, c_int, c_size_t, c_ulonglong, c_void_p


# ------------------------------------------------------------------------------------------- perf structures
class _AlgoPerf(ctypes.Structure):
    """Layout shared by cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t."""

    _fields_ = [("algo", c_int), ("status", c_int), ("time", c_float), ("memory", c_size_t),
                ("determinism", c_int), ("mathType", c_int), ("reserved", c_int * 3)]


ConvolutionFwdAlgoPerf = ConvolutionBwdDataAlgoPerf = ConvolutionBwdFilterAlgoPerf = _AlgoPerf


# ------------------------------------------------------------------------------------------------ prototypes
_st = c_int  # cudnnStatus_t
_h = c_void_p  # every handle / descriptor is an opaque pointer
_p = c_void_p  # device or host data pointer
_hp = POINTER(c_void_p)
_ip = POINTER(c_int)
_sp = POINTER(c_size_t)
_perf = POINTER(_AlgoPerf)


def _creators(*kinds: str) -> dict:
    """cudnnCreate<Kind>Descriptor / cudnnDestroy<Kind>Descriptor prototypes for each kind."""
    table = {}
    for kind in kinds:
        table[f"cudnnCreate{kind}Descriptor"] = (_st, (_hp,))
        table[f"cudnnDestroy{kind}Descriptor"] = (_st, (_h,))
    return table


PROTOTYPES = {
    "cudnnGetVersion": (c_size_t, ()),
    "cudnnGetCudartVersion": (c_size_t, ()),
    "cudnnGetErrorString": (c_char_p, (_st,)),
    "cudnnGetLastErrorString": (None, (ctypes.c_char_p, c_size_t)),
    "cudnnCreate": (_st, (_hp,)),
    "cudnnDestroy": (_st, (_h,)),
    "cudnnSetStream": (_st, (_h, c_void_p)),
    "cudnnGetStream": (_st, (_h, _hp)),
    **_creators("Tensor", "Filter", "Convolution", "Pooling", "Activation", "Dropout", "ReduceTensor", "OpTensor"),
    # tensors and filters
    "cudnnSetTensor4dDescriptor": (_st, (_h, c_int, c_int, c_int, c_int, c_int, c_int)),
    "cudnnSetTensor4dDescriptorEx": (_st, (_h, c_int) + (c_int,) * 8),
    "cudnnGetTensor4dDescriptor": (_st, (_h, _ip) + (_ip,) * 8),
    "cudnnSetTensorNdDescriptor": (_st, (_h, c_int, c_int, _ip, _ip)),
    "cudnnGetTensorNdDescriptor": (_st, (_h, c_int, _ip, _ip, _ip, _ip)),
    "cudnnGetTensorSizeInBytes": (_st, (_h, _sp)),
    "cudnnSetFilter4dDescriptor": (_st, (_h, c_int, c_int, c_int, c_int, c_int, c_int)),
    "cudnnSetFilterNdDescriptor": (_st, (_h, c_int, c_int, c_int, _ip)),
    "cudnnGetFilter4dDescriptor": (_st, (_h, _ip, _ip, _ip, _ip, _ip, _ip)),
    # convolution
    "cudnnSetConvolution2dDescriptor": (_st, (_h,) + (c_int,) * 6 + (c_int, c_int)),
    "cudnnSetConvolutionNdDescriptor": (_st, (_h, c_int, _ip, _ip, _ip, c_int, c_int)),
    "cudnnSetConvolutionMathType": (_st, (_h, c_int)),
    "cudnnGetConvolutionMathType": (_st, (_h, _ip)),
    "cudnnSetConvolutionGroupCount": (_st, (_h, c_int)),
    "cudnnGetConvolutionGroupCount": (_st, (_h, _ip)),
    "cudnnGetConvolution2dForwardOutputDim": (_st, (_h, _h, _h, _ip, _ip, _ip, _ip)),
    "cudnnGetConvolutionNdForwardOutputDim": (_st, (_h, _h, _h, c_int, _ip)),
    "cudnnGetConvolutionForwardAlgorithmMaxCount": (_st, (_h, _ip)),
    "cudnnGetConvolutionBackwardDataAlgorithmMaxCount": (_st, (_h, _ip)),
    "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount": (_st, (_h, _ip)),
    "cudnnGetConvolutionForwardAlgorithm_v7": (_st, (_h, _h, _h, _h, _h, c_int, _ip, _perf)),
    "cudnnGetConvolutionBackwardDataAlgorithm_v7": (_st, (_h, _h, _h, _h, _h, c_int, _ip, _perf)),
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7": (_st, (_h, _h, _h, _h, _h, c_int, _ip, _perf)),
    "cudnnFindConvolutionForwardAlgorithmEx": (_st, (_h, _h, _p, _h, _p, _h, _h, _p, c_int, _ip, _perf, _p, c_size_t)),
    "cudnnFindConvolutionBackwardDataAlgorithmEx": (_st, (_h, _h, _p, _h, _p, _h, _h, _p, c_int, _ip, _perf, _p,
                                                          c_size_t)),
    "cudnnFindConvolutionBackwardFilterAlgorithmEx": (_st, (_h, _h, _p, _h, _p, _h, _h, _p, c_int, _ip, _perf, _p,
                                                            c_size_t)),
    "cudnnGetConvolutionForwardWorkspaceSize": (_st, (_h, _h, _h, _h, _h, c_int, _sp)),
    "cudnnGetConvolutionBackwardDataWorkspaceSize": (_st, (_h, _h, _h, _h, _h, c_int, _sp)),
    "cudnnGetConvolutionBackwardFilterWorkspaceSize": (_st, (_h, _h, _h, _h, _h, c_int, _sp)),
    "cudnnConvolutionForward": (_st, (_h, _p, _h, _p, _h, _p, _h, c_int, _p, c_size_t, _p, _h, _p)),
    "cudnnConvolutionBackwardData": (_st, (_h, _p, _h, _p, _h, _p, _h, c_int, _p, c_size_t, _p, _h, _p)),
    "cudnnConvolutionBackwardFilter": (_st, (_h, _p, _h, _p, _h, _p, _h, c_int, _p, c_size_t, _p, _h, _p)),
    "cudnnConvolutionBackwardBias": (_st, (_h, _p, _h, _p, _p, _h, _p)),
    # pooling, activation, softmax
    "cudnnSetPooling2dDescriptor": (_st, (_h, c_int, c_int) + (c_int,) * 6),
    "cudnnSetPoolingNdDescriptor": (_st, (_h, c_int, c_int, c_int, _ip, _ip, _ip)),
    "cudnnGetPooling2dForwardOutputDim": (_st, (_h, _h, _ip, _ip, _ip, _ip)),
    "cudnnGetPoolingNdForwardOutputDim": (_st, (_h, _h, c_int, _ip)),
    "cudnnPoolingForward": (_st, (_h, _h, _p, _h, _p, _p, _h, _p)),
    "cudnnPoolingBackward": (_st, (_h, _h, _p, _h, _p, _h, _p, _h, _p, _p, _h, _p)),
    "cudnnSetActivationDescriptor": (_st, (_h, c_int, c_int, c_double)),
    "cudnnSetActivationDescriptorSwishBeta": (_st, (_h, c_double)),
    "cudnnActivationForward": (_st, (_h, _h, _p, _h, _p, _p, _h, _p)),
    "cudnnActivationBackward": (_st, (_h, _h, _p, _h, _p, _h, _p, _h, _p, _p, _h, _p)),
    "cudnnSoftmaxForward": (_st, (_h, c_int, c_int, _p, _h, _p, _p, _h, _p)),
    "cudnnSoftmaxBackward": (_st, (_h, c_int, c_int, _p, _h, _p, _h, _p, _p, _h, _p)),
    # batch normalisation
    "cudnnDeriveBNTensorDescriptor": (_st, (_h, _h, c_int)),
    "cudnnBatchNormalizationForwardTraining": (_st, (_h, c_int, _p, _p, _h, _p, _h, _p, _h, _p, _p, c_double, _p, _p,
                                                     c_double, _p, _p)),
    "cudnnBatchNormalizationForwardInference": (_st, (_h, c_int, _p, _p, _h, _p, _h, _p, _h, _p, _p, _p, _p,
                                                      c_double)),
    "cudnnBatchNormalizationBackward": (_st, (_h, c_int, _p, _p, _p, _p, _h, _p, _h, _p, _h, _p, _h, _p, _p, _p,
                                              c_double, _p, _p)),
    # dropout
    "cudnnDropoutGetStatesSize": (_st, (_h, _sp)),
    "cudnnDropoutGetReserveSpaceSize": (_st, (_h, _sp)),
    "cudnnSetDropoutDescriptor": (_st, (_h, _h, c_float, _p, c_size_t, c_ulonglong)),
    "cudnnRestoreDropoutDescriptor": (_st, (_h, _h, c_float, _p, c_size_t, c_ulonglong)),
    "cudnnDropoutForward": (_st, (_h, _h, _h, _p, _h, _p, _p, c_size_t)),
    "cudnnDropoutBackward": (_st, (_h, _h, _h, _p, _h, _p, _p, c_size_t)),
    # tensor arithmetic
    "cudnnSetOpTensorDescriptor": (_st, (_h, c_int, c_int, c_int)),
    "cudnnSetReduceTensorDescriptor": (_st, (_h, c_int, c_int, c_int, c_int, c_int)),
    "cudnnGetReductionWorkspaceSize": (_st, (_h, _h, _h, _h, _sp)),
    "cudnnGetReductionIndicesSize": (_st, (_h, _h, _h, _h, _sp)),
    "cudnnReduceTensor": (_st, (_h, _h, _p, c_size_t, _p, c_size_t, _p, _h, _p, _p, _h, _p)),
    "cudnnOpTensor": (_st, (_h, _h, _p, _h, _p, _p, _h, _p, _p, _h, _p)),
    "cudnnAddTensor": (_st, (_h, _p, _h, _p, _p, _h, _p)),
    "cudnnScaleTensor": (_st, (_h, _h, _p, _p)),
    "cudnnSetTensor": (_st, (_h, _h, _p, _p)),
}
