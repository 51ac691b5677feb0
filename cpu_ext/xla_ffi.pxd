# Declarations of the parts of XLA's FFI C API that the handler uses, taken
# from the header jaxlib ships (xla/ffi/api/c_api.h). Cython checks nothing
# about struct layouts: the C compiler uses the real header.
from libc.stdint cimport int64_t


cdef extern from *:
    """
    #include "xla/ffi/api/c_api.h"
    /* FFI API 0.4 (jaxlib 0.11) renamed the header of the call frame's
       extensions, keeping its layout. */
    #if XLA_FFI_API_MINOR >= 4
    typedef XLA_FFI_InternalExtension jaxsearch_FfiExtensionBase;
    #else
    typedef XLA_FFI_Extension_Base jaxsearch_FfiExtensionBase;
    #endif
    """
    ctypedef struct XLA_FFI_Extension_Base "jaxsearch_FfiExtensionBase":
        size_t struct_size
        int type


cdef extern from "xla/ffi/api/c_api.h" nogil:
    enum:
        XLA_FFI_API_MAJOR
        XLA_FFI_API_MINOR
        XLA_FFI_Api_Version_STRUCT_SIZE
        XLA_FFI_Error_Create_Args_STRUCT_SIZE
        XLA_FFI_Error_Destroy_Args_STRUCT_SIZE
        XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE
        XLA_FFI_CallFrame_STRUCT_SIZE
        XLA_FFI_Metadata_STRUCT_SIZE

    enum:
        XLA_FFI_Extension_Metadata

    ctypedef struct XLA_FFI_Api_Version:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        int major_version
        int minor_version

    ctypedef struct XLA_FFI_Error

    ctypedef enum XLA_FFI_Error_Code:
        XLA_FFI_Error_Code_INVALID_ARGUMENT
        XLA_FFI_Error_Code_UNIMPLEMENTED

    ctypedef struct XLA_FFI_Error_Create_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        const char* message
        XLA_FFI_Error_Code errc

    ctypedef struct XLA_FFI_Error_Destroy_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Error* error

    ctypedef struct XLA_FFI_ExecutionContext

    ctypedef struct XLA_FFI_ThreadPool_Schedule_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_ExecutionContext* ctx
        void (*task)(void* data) noexcept nogil
        void* data

    ctypedef enum XLA_FFI_DataType:
        XLA_FFI_DataType_PRED
        XLA_FFI_DataType_S8
        XLA_FFI_DataType_S16
        XLA_FFI_DataType_S32
        XLA_FFI_DataType_S64
        XLA_FFI_DataType_U8
        XLA_FFI_DataType_U16
        XLA_FFI_DataType_U32
        XLA_FFI_DataType_U64
        XLA_FFI_DataType_F32
        XLA_FFI_DataType_F64

    ctypedef struct XLA_FFI_Buffer:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_DataType dtype
        void* data
        int64_t rank
        int64_t* dims

    ctypedef enum XLA_FFI_ArgType:
        XLA_FFI_ArgType_BUFFER

    ctypedef enum XLA_FFI_RetType:
        XLA_FFI_RetType_BUFFER

    ctypedef enum XLA_FFI_AttrType:
        XLA_FFI_AttrType_SCALAR

    ctypedef struct XLA_FFI_ByteSpan:
        const char* ptr
        size_t len

    ctypedef struct XLA_FFI_Scalar:
        XLA_FFI_DataType dtype
        void* value

    ctypedef enum XLA_FFI_ExecutionStage:
        XLA_FFI_ExecutionStage_EXECUTE

    ctypedef struct XLA_FFI_Args:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        int64_t size
        XLA_FFI_ArgType* types
        void** args

    ctypedef struct XLA_FFI_Rets:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        int64_t size
        XLA_FFI_RetType* types
        void** rets

    ctypedef struct XLA_FFI_Attrs:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        int64_t size
        XLA_FFI_AttrType* types
        XLA_FFI_ByteSpan** names
        void** attrs

    ctypedef struct XLA_FFI_Api:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        XLA_FFI_Api_Version api_version
        XLA_FFI_Error* (*XLA_FFI_Error_Create)(XLA_FFI_Error_Create_Args*) noexcept nogil
        void (*XLA_FFI_Error_Destroy)(XLA_FFI_Error_Destroy_Args*) noexcept nogil
        XLA_FFI_Error* (*XLA_FFI_ThreadPool_Schedule)(
            XLA_FFI_ThreadPool_Schedule_Args*) noexcept nogil

    ctypedef struct XLA_FFI_CallFrame:
        size_t struct_size
        XLA_FFI_Extension_Base* extension_start
        const XLA_FFI_Api* api
        XLA_FFI_ExecutionContext* ctx
        XLA_FFI_ExecutionStage stage
        XLA_FFI_Args args
        XLA_FFI_Rets rets
        XLA_FFI_Attrs attrs

    ctypedef unsigned int XLA_FFI_Handler_Traits "XLA_FFI_Handler_Traits"

    ctypedef struct XLA_FFI_Metadata:
        size_t struct_size
        XLA_FFI_Api_Version api_version
        XLA_FFI_Handler_Traits traits

    ctypedef struct XLA_FFI_Metadata_Extension:
        XLA_FFI_Extension_Base extension_base
        XLA_FFI_Metadata* metadata
