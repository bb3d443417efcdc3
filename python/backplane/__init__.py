"""Backplane from Python: devices picked at run time, every operator of the
table (the standard ones and plugins'), zero-copy exchange with NumPy and
PyTorch through DLPack. docs/python.md is the guide.
"""
from ._backplane import (  # noqa: F401
    Device,
    DeviceCapabilities,
    DeviceInfo,
    DeviceProperties,
    Error,
    OpOverloadPacket,
    PluginInfo,
    Tensor,
    UnavailableDeviceType,
    capabilities,
    describe,
    device,
    devices,
    dtype,
    load_plugin,
    plugins,
    synchronize,
    unavailable,
)
from ._backplane import (  # noqa: F401
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from ._backplane import (  # noqa: F401
    bfloat16,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._backplane import bool as bool_  # noqa: F401
from ._backplane import from_dlpack, tensor  # noqa: F401

from ._backplane import initial_seed, manual_seed  # noqa: F401
from ._backplane import Event, Graph, Stream, default_stream  # noqa: F401
from .streams import current_stream, stream  # noqa: F401

from . import _ops
from ._ops import ops  # noqa: F401

from . import autograd  # noqa: F401
from . import optim  # noqa: F401
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from . import conformance  # noqa: F401
from . import distributed  # noqa: F401
from .profiler import profile  # noqa: F401

globals()["bool"] = bool_
_ops.install(globals())
