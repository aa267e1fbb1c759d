//! The table of every OpenCL entry point this library exports and the slot that holds the real
//! implementation's address once resolved.
//!
//! The list is the ICD loader's full export set (OpenCL 1.0 to 3.0 core plus the GL/EGL sharing
//! and KHR entry points a loader exports), so that a program which loads this library in place
//! of `libOpenCL.so.1` finds everything it would find there. Entry points listed under
//! `tracked` are written out in [`crate::tracked`]; the `forwarded` ones are generated jump stubs
//! in [`crate::forward`].

use std::sync::atomic::AtomicUsize;

macro_rules! symbol_table {
    (tracked: [$($t:ident),* $(,)?], forwarded: [$($f:ident),* $(,)?] $(,)?) => {
        /// Every exported OpenCL entry point, by position in [`NAMES`] and [`SLOTS`].
        #[expect(non_camel_case_types, reason = "variants are the C function names")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub(crate) enum Sym {
            $($t,)*
            $($f,)*
        }

        /// NUL-terminated names, indexed by [`Sym`].
        pub(crate) const NAMES: &[&str] = &[
            $(concat!(stringify!($t), "\0"),)*
            $(concat!(stringify!($f), "\0"),)*
        ];

        // One exported jump stub per forwarded entry point.
        $(crate::forward::stub!($f);)*
    };
}

symbol_table! {
    tracked: [
        clGetPlatformIDs,
        clGetExtensionFunctionAddress,
        clGetExtensionFunctionAddressForPlatform,
        clCreateBuffer,
        clCreateBufferWithProperties,
        clCreateSubBuffer,
        clCreateImage,
        clCreateImage2D,
        clCreateImage3D,
        clCreateImageWithProperties,
        clCreatePipe,
        clRetainMemObject,
        clReleaseMemObject,
        clSVMAlloc,
        clSVMFree,
        clEnqueueSVMFree,
        clCreateContext,
        clCreateContextFromType,
        clRetainContext,
        clReleaseContext,
        clCreateCommandQueue,
        clCreateCommandQueueWithProperties,
        clRetainCommandQueue,
        clReleaseCommandQueue,
        clCreateProgramWithSource,
        clCreateProgramWithBinary,
        clCreateProgramWithIL,
        clCreateProgramWithBuiltInKernels,
        clLinkProgram,
        clRetainProgram,
        clReleaseProgram,
        clCreateKernel,
        clCreateKernelsInProgram,
        clCloneKernel,
        clRetainKernel,
        clReleaseKernel,
    ],
    forwarded: [
        clBuildProgram,
        clCompileProgram,
        clCreateEventFromEGLSyncKHR,
        clCreateEventFromGLsyncKHR,
        clCreateFromEGLImageKHR,
        clCreateFromGLBuffer,
        clCreateFromGLRenderbuffer,
        clCreateFromGLTexture,
        clCreateFromGLTexture2D,
        clCreateFromGLTexture3D,
        clCreateSampler,
        clCreateSamplerWithProperties,
        clCreateSubDevices,
        clCreateSubDevicesEXT,
        clCreateUserEvent,
        clEnqueueAcquireEGLObjectsKHR,
        clEnqueueAcquireGLObjects,
        clEnqueueBarrier,
        clEnqueueBarrierWithWaitList,
        clEnqueueCopyBuffer,
        clEnqueueCopyBufferRect,
        clEnqueueCopyBufferToImage,
        clEnqueueCopyImage,
        clEnqueueCopyImageToBuffer,
        clEnqueueFillBuffer,
        clEnqueueFillImage,
        clEnqueueMapBuffer,
        clEnqueueMapImage,
        clEnqueueMarker,
        clEnqueueMarkerWithWaitList,
        clEnqueueMigrateMemObjects,
        clEnqueueNDRangeKernel,
        clEnqueueNativeKernel,
        clEnqueueReadBuffer,
        clEnqueueReadBufferRect,
        clEnqueueReadImage,
        clEnqueueReleaseEGLObjectsKHR,
        clEnqueueReleaseGLObjects,
        clEnqueueSVMMap,
        clEnqueueSVMMemFill,
        clEnqueueSVMMemcpy,
        clEnqueueSVMMigrateMem,
        clEnqueueSVMUnmap,
        clEnqueueTask,
        clEnqueueUnmapMemObject,
        clEnqueueWaitForEvents,
        clEnqueueWriteBuffer,
        clEnqueueWriteBufferRect,
        clEnqueueWriteImage,
        clFinish,
        clFlush,
        clGetCommandQueueInfo,
        clGetContextInfo,
        clGetDeviceAndHostTimer,
        clGetDeviceIDs,
        clGetDeviceInfo,
        clGetEventInfo,
        clGetEventProfilingInfo,
        clGetGLContextInfoKHR,
        clGetGLObjectInfo,
        clGetGLTextureInfo,
        clGetHostTimer,
        clGetImageInfo,
        clGetKernelArgInfo,
        clGetKernelInfo,
        clGetKernelSubGroupInfo,
        clGetKernelSubGroupInfoKHR,
        clGetKernelWorkGroupInfo,
        clGetMemObjectInfo,
        clGetPipeInfo,
        clGetPlatformInfo,
        clGetProgramBuildInfo,
        clGetProgramInfo,
        clGetSamplerInfo,
        clGetSupportedImageFormats,
        clReleaseDevice,
        clReleaseDeviceEXT,
        clReleaseEvent,
        clReleaseSampler,
        clRetainDevice,
        clRetainDeviceEXT,
        clRetainEvent,
        clRetainSampler,
        clSetCommandQueueProperty,
        clSetContextDestructorCallback,
        clSetDefaultDeviceCommandQueue,
        clSetEventCallback,
        clSetKernelArg,
        clSetKernelArgSVMPointer,
        clSetKernelExecInfo,
        clSetMemObjectDestructorCallback,
        clSetProgramReleaseCallback,
        clSetProgramSpecializationConstant,
        clSetUserEventStatus,
        clUnloadCompiler,
        clUnloadPlatformCompiler,
        clWaitForEvents,
    ],
}

/// Number of entry points in the table.
pub(crate) const COUNT: usize = NAMES.len();

/// Resolved addresses of the real entry points, indexed by [`Sym`]; 0 until resolved.
pub(crate) static SLOTS: [AtomicUsize; COUNT] = [const { AtomicUsize::new(0) }; COUNT];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_line_up_with_the_enum_and_are_unique() {
        assert_eq!(NAMES[Sym::clCreateBuffer as usize], "clCreateBuffer\0");
        assert_eq!(NAMES[Sym::clWaitForEvents as usize], "clWaitForEvents\0");
        let mut sorted = NAMES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), COUNT);
    }
}
