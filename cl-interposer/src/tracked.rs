//! The entry points that create, retain and release objects: each forwards to the real one and
//! records the outcome in the [`crate::REGISTRY`].
//!
//! Creates are recorded after the real call (only a handle that exists is counted); releases are
//! recorded before it and undone if it fails, because once the real release returns another
//! thread may be handed the same address for a new object.

use std::ffi::{c_char, c_void, CStr};

use libc::size_t;
use opencl_sys::cl_function_types::*;
use opencl_sys::*;

use crate::real::real;
use crate::registry::Kind;
use crate::sites::caller_stack;
use crate::REGISTRY;

/// What every entry point returns when no real OpenCL library could be loaded.
const NO_REAL_LIBRARY: cl_int = CL_PLATFORM_NOT_FOUND_KHR;

unsafe fn set_error(errcode_ret: *mut cl_int, code: cl_int) {
    if !errcode_ret.is_null() {
        // SAFETY: the caller passed a writable error slot or NULL.
        unsafe { *errcode_ret = code };
    }
}

/// Records a created object, with its caller's stack as its site, and hands the handle back.
///
/// Never inlined, so that the stack walk starts in this library's frames (skipped) whatever the
/// entry point that called it.
#[inline(never)]
fn created<T>(kind: Kind, handle: *mut T, bytes: u64) -> *mut T {
    if !handle.is_null() {
        REGISTRY.created_at(kind, handle as usize, bytes, &caller_stack());
    }
    handle
}

/// The size the runtime reports for a memory object (images: what their format and extent need).
fn mem_size(mem: cl_mem) -> u64 {
    let Some(info) = real!(clGetMemObjectInfo as clGetMemObjectInfo_t) else {
        return 0;
    };
    let mut size: size_t = 0;
    // SAFETY: CL_MEM_SIZE writes one size_t into `size`.
    let status = unsafe {
        info(
            mem,
            CL_MEM_SIZE,
            std::mem::size_of::<size_t>(),
            (&mut size as *mut size_t).cast(),
            std::ptr::null_mut(),
        )
    };
    if status == CL_SUCCESS {
        size as u64
    } else {
        0
    }
}

/// Runs a real release with the registry updated first and reverted on failure.
fn release(kind: Kind, handle: usize, real_release: impl FnOnce() -> cl_int) -> cl_int {
    let token = REGISTRY.released(kind, handle);
    let status = real_release();
    if status != CL_SUCCESS {
        REGISTRY.revert(token);
    }
    status
}

/// Runs a real retain and records it if it succeeded.
fn retain(kind: Kind, handle: usize, real_retain: impl FnOnce() -> cl_int) -> cl_int {
    let status = real_retain();
    if status == CL_SUCCESS {
        REGISTRY.retained(kind, handle);
    }
    status
}

/// Forwards a create call: `$call` is the real call with the real function bound to `f`.
macro_rules! create {
    ($name:ident as $ty:ident, $errcode:expr, |$f:ident| $call:expr) => {{
        match real!($name as $ty) {
            // SAFETY: the arguments are the caller's, passed through unchanged.
            Some($f) => unsafe { $call },
            None => {
                // SAFETY: as above.
                unsafe { set_error($errcode, NO_REAL_LIBRARY) };
                std::ptr::null_mut()
            }
        }
    }};
}

/// Retain/release pairs for one kind.
macro_rules! refcounting {
    ($kind:expr, $handle_ty:ty, $retain:ident as $retain_ty:ident, $release:ident as $release_ty:ident) => {
        #[doc = concat!("Forwards `", stringify!($retain), "` and counts the new reference.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $retain(handle: $handle_ty) -> cl_int {
            match real!($retain as $retain_ty) {
                // SAFETY: the caller's handle, passed through.
                Some(f) => retain($kind, handle as usize, || unsafe { f(handle) }),
                None => NO_REAL_LIBRARY,
            }
        }

        #[doc = concat!("Forwards `", stringify!($release), "`; the last reference releases the object.")]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $release(handle: $handle_ty) -> cl_int {
            match real!($release as $release_ty) {
                // SAFETY: the caller's handle, passed through.
                Some(f) => release($kind, handle as usize, || unsafe { f(handle) }),
                None => NO_REAL_LIBRARY,
            }
        }
    };
}

refcounting!(
    Kind::Mem,
    cl_mem,
    clRetainMemObject as clRetainMemObject_t,
    clReleaseMemObject as clReleaseMemObject_t
);
refcounting!(
    Kind::Context,
    cl_context,
    clRetainContext as clRetainContext_t,
    clReleaseContext as clReleaseContext_t
);
refcounting!(
    Kind::CommandQueue,
    cl_command_queue,
    clRetainCommandQueue as clRetainCommandQueue_t,
    clReleaseCommandQueue as clReleaseCommandQueue_t
);
refcounting!(
    Kind::Program,
    cl_program,
    clRetainProgram as clRetainProgram_t,
    clReleaseProgram as clReleaseProgram_t
);
refcounting!(
    Kind::Kernel,
    cl_kernel,
    clRetainKernel as clRetainKernel_t,
    clReleaseKernel as clReleaseKernel_t
);

/// Forwards `clGetPlatformIDs`; without a real library it reports no platform instead of failing
/// hard, as an ICD loader with no drivers does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetPlatformIDs(
    num_entries: cl_uint,
    platforms: *mut cl_platform_id,
    num_platforms: *mut cl_uint,
) -> cl_int {
    match real!(clGetPlatformIDs as clGetPlatformIDs_t) {
        // SAFETY: the caller's arguments, passed through.
        Some(f) => unsafe { f(num_entries, platforms, num_platforms) },
        None => {
            if !num_platforms.is_null() {
                // SAFETY: the caller passed a writable count or NULL.
                unsafe { *num_platforms = 0 };
            }
            NO_REAL_LIBRARY
        }
    }
}

/// Forwards `clCreateBuffer` and counts the buffer with its requested size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateBuffer(
    context: cl_context,
    flags: cl_mem_flags,
    size: size_t,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(clCreateBuffer as clCreateBuffer_t, errcode_ret, |f| f(
        context,
        flags,
        size,
        host_ptr,
        errcode_ret
    ));
    created(Kind::Mem, mem, size as u64)
}

/// Forwards `clCreateBufferWithProperties` and counts the buffer with its requested size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateBufferWithProperties(
    context: cl_context,
    properties: *const cl_mem_properties,
    flags: cl_mem_flags,
    size: size_t,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(
        clCreateBufferWithProperties as clCreateBufferWithProperties_t,
        errcode_ret,
        |f| f(context, properties, flags, size, host_ptr, errcode_ret)
    );
    created(Kind::Mem, mem, size as u64)
}

/// Forwards `clCreateSubBuffer`; a sub-buffer is counted as an object with 0 bytes, since its
/// storage is its parent's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateSubBuffer(
    buffer: cl_mem,
    flags: cl_mem_flags,
    buffer_create_type: cl_buffer_create_type,
    buffer_create_info: *const c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(
        clCreateSubBuffer as clCreateSubBuffer_t,
        errcode_ret,
        |f| f(
            buffer,
            flags,
            buffer_create_type,
            buffer_create_info,
            errcode_ret
        )
    );
    created(Kind::Mem, mem, 0)
}

/// Forwards `clCreateImage` and counts the image with the size the runtime reports for it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateImage(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_desc: *const cl_image_desc,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(clCreateImage as clCreateImage_t, errcode_ret, |f| f(
        context,
        flags,
        image_format,
        image_desc,
        host_ptr,
        errcode_ret
    ));
    created(Kind::Mem, mem, mem_size(mem))
}

/// Forwards `clCreateImageWithProperties` and counts the image with its reported size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateImageWithProperties(
    context: cl_context,
    properties: *const cl_mem_properties,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_desc: *const cl_image_desc,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(
        clCreateImageWithProperties as clCreateImageWithProperties_t,
        errcode_ret,
        |f| f(
            context,
            properties,
            flags,
            image_format,
            image_desc,
            host_ptr,
            errcode_ret
        )
    );
    created(Kind::Mem, mem, mem_size(mem))
}

/// Forwards the OpenCL 1.1 `clCreateImage2D` and counts the image with its reported size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateImage2D(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_width: size_t,
    image_height: size_t,
    image_row_pitch: size_t,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(clCreateImage2D as clCreateImage2D_t, errcode_ret, |f| f(
        context,
        flags,
        image_format,
        image_width,
        image_height,
        image_row_pitch,
        host_ptr,
        errcode_ret
    ));
    created(Kind::Mem, mem, mem_size(mem))
}

/// Forwards the OpenCL 1.1 `clCreateImage3D` and counts the image with its reported size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateImage3D(
    context: cl_context,
    flags: cl_mem_flags,
    image_format: *const cl_image_format,
    image_width: size_t,
    image_height: size_t,
    image_depth: size_t,
    image_row_pitch: size_t,
    image_slice_pitch: size_t,
    host_ptr: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(clCreateImage3D as clCreateImage3D_t, errcode_ret, |f| f(
        context,
        flags,
        image_format,
        image_width,
        image_height,
        image_depth,
        image_row_pitch,
        image_slice_pitch,
        host_ptr,
        errcode_ret
    ));
    created(Kind::Mem, mem, mem_size(mem))
}

/// Forwards `clCreatePipe` and counts the pipe with its packet storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreatePipe(
    context: cl_context,
    flags: cl_mem_flags,
    pipe_packet_size: cl_uint,
    pipe_max_packets: cl_uint,
    properties: *const cl_pipe_properties,
    errcode_ret: *mut cl_int,
) -> cl_mem {
    let mem = create!(clCreatePipe as clCreatePipe_t, errcode_ret, |f| f(
        context,
        flags,
        pipe_packet_size,
        pipe_max_packets,
        properties,
        errcode_ret
    ));
    created(
        Kind::Mem,
        mem,
        u64::from(pipe_packet_size) * u64::from(pipe_max_packets),
    )
}

/// Forwards `clSVMAlloc` and counts the allocation with its size.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clSVMAlloc(
    context: cl_context,
    flags: cl_svm_mem_flags,
    size: size_t,
    alignment: cl_uint,
) -> *mut c_void {
    let Some(f) = real!(clSVMAlloc as clSVMAlloc_t) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, passed through.
    let ptr = unsafe { f(context, flags, size, alignment) };
    created(Kind::Svm, ptr, size as u64)
}

/// Forwards `clSVMFree`, which has no status: the allocation counts as released.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clSVMFree(context: cl_context, svm_pointer: *mut c_void) {
    if let Some(f) = real!(clSVMFree as clSVMFree_t) {
        if !svm_pointer.is_null() {
            REGISTRY.released(Kind::Svm, svm_pointer as usize);
        }
        // SAFETY: the caller's arguments, passed through.
        unsafe { f(context, svm_pointer) };
    }
}

/// Forwards `clEnqueueSVMFree`; without a callback the runtime frees the pointers itself, so they
/// count as released (with a callback the application frees them, usually through `clSVMFree`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clEnqueueSVMFree(
    command_queue: cl_command_queue,
    num_svm_pointers: cl_uint,
    svm_pointers: *mut *mut c_void,
    pfn_free_func: Option<
        unsafe extern "C" fn(
            queue: cl_command_queue,
            num_svm_pointers: cl_uint,
            svm_pointers: *mut *mut c_void,
            user_data: *mut c_void,
        ),
    >,
    user_data: *mut c_void,
    num_events_in_wait_list: cl_uint,
    event_wait_list: *const cl_event,
    event: *mut cl_event,
) -> cl_int {
    let Some(f) = real!(clEnqueueSVMFree as clEnqueueSVMFree_t) else {
        return NO_REAL_LIBRARY;
    };
    let tokens: Vec<_> = if pfn_free_func.is_none() && !svm_pointers.is_null() {
        // SAFETY: the caller passes `num_svm_pointers` pointers.
        let ptrs = unsafe { std::slice::from_raw_parts(svm_pointers, num_svm_pointers as usize) };
        ptrs.iter()
            .filter(|p| !p.is_null())
            .map(|p| REGISTRY.released(Kind::Svm, *p as usize))
            .collect()
    } else {
        Vec::new()
    };
    // SAFETY: the caller's arguments, passed through.
    let status = unsafe {
        f(
            command_queue,
            num_svm_pointers,
            svm_pointers,
            pfn_free_func,
            user_data,
            num_events_in_wait_list,
            event_wait_list,
            event,
        )
    };
    if status != CL_SUCCESS {
        tokens.into_iter().for_each(|t| REGISTRY.revert(t));
    }
    status
}

/// Forwards `clCreateContext` and counts the context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateContext(
    properties: *const cl_context_properties,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    pfn_notify: Option<
        unsafe extern "C" fn(
            errinfo: *const c_char,
            private_info: *const c_void,
            cb: size_t,
            user_data: *mut c_void,
        ),
    >,
    user_data: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_context {
    let ctx = create!(clCreateContext as clCreateContext_t, errcode_ret, |f| f(
        properties,
        num_devices,
        devices,
        pfn_notify,
        user_data,
        errcode_ret
    ));
    created(Kind::Context, ctx, 0)
}

/// Forwards `clCreateContextFromType` and counts the context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateContextFromType(
    properties: *const cl_context_properties,
    device_type: cl_device_type,
    pfn_notify: Option<
        unsafe extern "C" fn(
            errinfo: *const c_char,
            private_info: *const c_void,
            cb: size_t,
            user_data: *mut c_void,
        ),
    >,
    user_data: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_context {
    let ctx = create!(
        clCreateContextFromType as clCreateContextFromType_t,
        errcode_ret,
        |f| f(properties, device_type, pfn_notify, user_data, errcode_ret)
    );
    created(Kind::Context, ctx, 0)
}

/// Forwards the OpenCL 1.x `clCreateCommandQueue` and counts the queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateCommandQueue(
    context: cl_context,
    device: cl_device_id,
    properties: cl_command_queue_properties,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    let queue = create!(
        clCreateCommandQueue as clCreateCommandQueue_t,
        errcode_ret,
        |f| f(context, device, properties, errcode_ret)
    );
    created(Kind::CommandQueue, queue, 0)
}

/// Forwards `clCreateCommandQueueWithProperties` and counts the queue.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateCommandQueueWithProperties(
    context: cl_context,
    device: cl_device_id,
    properties: *const cl_queue_properties,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    let queue = create!(
        clCreateCommandQueueWithProperties as clCreateCommandQueueWithProperties_t,
        errcode_ret,
        |f| f(context, device, properties, errcode_ret)
    );
    created(Kind::CommandQueue, queue, 0)
}

/// Forwards `clCreateProgramWithSource` and counts the program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithSource(
    context: cl_context,
    count: cl_uint,
    strings: *mut *const c_char,
    lengths: *const size_t,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let program = create!(
        clCreateProgramWithSource as clCreateProgramWithSource_t,
        errcode_ret,
        |f| f(context, count, strings, lengths, errcode_ret)
    );
    created(Kind::Program, program, 0)
}

/// Forwards `clCreateProgramWithBinary` and counts the program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithBinary(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    lengths: *const size_t,
    binaries: *mut *const u8,
    binary_status: *mut cl_int,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let program = create!(
        clCreateProgramWithBinary as clCreateProgramWithBinary_t,
        errcode_ret,
        |f| f(
            context,
            num_devices,
            device_list,
            lengths,
            binaries,
            binary_status,
            errcode_ret
        )
    );
    created(Kind::Program, program, 0)
}

/// Forwards `clCreateProgramWithIL` and counts the program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithIL(
    context: cl_context,
    il: *const c_void,
    length: size_t,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let program = create!(
        clCreateProgramWithIL as clCreateProgramWithIL_t,
        errcode_ret,
        |f| f(context, il, length, errcode_ret)
    );
    created(Kind::Program, program, 0)
}

/// Forwards `clCreateProgramWithBuiltInKernels` and counts the program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateProgramWithBuiltInKernels(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    kernel_names: *const c_char,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let program = create!(
        clCreateProgramWithBuiltInKernels as clCreateProgramWithBuiltInKernels_t,
        errcode_ret,
        |f| f(context, num_devices, device_list, kernel_names, errcode_ret)
    );
    created(Kind::Program, program, 0)
}

/// Forwards `clLinkProgram`, which creates a new program, and counts it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clLinkProgram(
    context: cl_context,
    num_devices: cl_uint,
    device_list: *const cl_device_id,
    options: *const c_char,
    num_input_programs: cl_uint,
    input_programs: *const cl_program,
    pfn_notify: Option<unsafe extern "C" fn(program: cl_program, user_data: *mut c_void)>,
    user_data: *mut c_void,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let program = create!(clLinkProgram as clLinkProgram_t, errcode_ret, |f| f(
        context,
        num_devices,
        device_list,
        options,
        num_input_programs,
        input_programs,
        pfn_notify,
        user_data,
        errcode_ret
    ));
    created(Kind::Program, program, 0)
}

/// Forwards `clCreateKernel` and counts the kernel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateKernel(
    program: cl_program,
    kernel_name: *const c_char,
    errcode_ret: *mut cl_int,
) -> cl_kernel {
    let kernel = create!(clCreateKernel as clCreateKernel_t, errcode_ret, |f| f(
        program,
        kernel_name,
        errcode_ret
    ));
    created(Kind::Kernel, kernel, 0)
}

/// Forwards `clCloneKernel` and counts the copy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCloneKernel(
    source_kernel: cl_kernel,
    errcode_ret: *mut cl_int,
) -> cl_kernel {
    let kernel = create!(clCloneKernel as clCloneKernel_t, errcode_ret, |f| f(
        source_kernel,
        errcode_ret
    ));
    created(Kind::Kernel, kernel, 0)
}

/// Forwards `clCreateKernelsInProgram` and counts every kernel it wrote out.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clCreateKernelsInProgram(
    program: cl_program,
    num_kernels: cl_uint,
    kernels: *mut cl_kernel,
    num_kernels_ret: *mut cl_uint,
) -> cl_int {
    let Some(f) = real!(clCreateKernelsInProgram as clCreateKernelsInProgram_t) else {
        return NO_REAL_LIBRARY;
    };
    // SAFETY: the caller's arguments, passed through.
    let status = unsafe { f(program, num_kernels, kernels, num_kernels_ret) };
    if status == CL_SUCCESS && !kernels.is_null() {
        // With an output array the runtime created exactly `num_kernels` kernels (a smaller
        // array is an error); a size query alone (NULL array) creates none.
        // SAFETY: the runtime wrote `num_kernels` handles into the caller's array.
        let made = unsafe { std::slice::from_raw_parts(kernels, num_kernels as usize) };
        for k in made {
            created(Kind::Kernel, *k, 0);
        }
    }
    status
}

/// The tracked entry points an extension lookup may ask for, with this library's versions.
fn own_entry_point(name: &CStr) -> Option<*mut c_void> {
    let ptr: *mut c_void = match name.to_bytes() {
        b"clCreateCommandQueueWithPropertiesKHR" => counting_create_queue_khr as *mut c_void,
        b"clCreateProgramWithILKHR" => counting_create_program_il_khr as *mut c_void,
        _ => return None,
    };
    Some(ptr)
}

/// Forwards `clGetExtensionFunctionAddress`; for the KHR spellings of tracked creators it keeps
/// the real address and hands out this library's counting version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetExtensionFunctionAddress(func_name: *const c_char) -> *mut c_void {
    let Some(f) = real!(clGetExtensionFunctionAddress as clGetExtensionFunctionAddress_t) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's NUL-terminated name, passed through.
    let addr = unsafe { f(func_name) };
    // SAFETY: the name is a NUL-terminated C string per the OpenCL API.
    unsafe { wrap_extension(func_name, addr) }
}

/// Forwards `clGetExtensionFunctionAddressForPlatform`, wrapping tracked creators as above.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetExtensionFunctionAddressForPlatform(
    platform: cl_platform_id,
    func_name: *const c_char,
) -> *mut c_void {
    let Some(f) = real!(
        clGetExtensionFunctionAddressForPlatform as clGetExtensionFunctionAddressForPlatform_t
    ) else {
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, passed through.
    let addr = unsafe { f(platform, func_name) };
    // SAFETY: the name is a NUL-terminated C string per the OpenCL API.
    unsafe { wrap_extension(func_name, addr) }
}

unsafe fn wrap_extension(func_name: *const c_char, addr: *mut c_void) -> *mut c_void {
    if addr.is_null() || func_name.is_null() {
        return addr;
    }
    // SAFETY: checked non-NULL; NUL-terminated per the API.
    let name = unsafe { CStr::from_ptr(func_name) };
    match own_entry_point(name) {
        Some(ours) => {
            crate::extensions::remember(name, addr as usize);
            ours
        }
        None => addr,
    }
}

/// The counting version of `clCreateCommandQueueWithPropertiesKHR` handed out by extension
/// lookups (not exported: applications reach it only through the lookup).
unsafe extern "C" fn counting_create_queue_khr(
    context: cl_context,
    device: cl_device_id,
    properties: *const cl_queue_properties,
    errcode_ret: *mut cl_int,
) -> cl_command_queue {
    let addr = crate::extensions::CREATE_QUEUE_KHR.load(std::sync::atomic::Ordering::Acquire);
    // SAFETY: stored from the real extension lookup under this exact name.
    let f = unsafe {
        std::mem::transmute::<usize, opencl_sys::clCreateCommandQueueWithPropertiesKHR_t>(addr)
    };
    let Some(f) = f else {
        // SAFETY: the caller's error slot or NULL.
        unsafe { set_error(errcode_ret, NO_REAL_LIBRARY) };
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, passed through.
    let queue = unsafe { f(context, device, properties, errcode_ret) };
    created(Kind::CommandQueue, queue, 0)
}

/// The counting version of `clCreateProgramWithILKHR` handed out by extension lookups.
unsafe extern "C" fn counting_create_program_il_khr(
    context: cl_context,
    il: *const c_void,
    length: size_t,
    errcode_ret: *mut cl_int,
) -> cl_program {
    let addr = crate::extensions::CREATE_PROGRAM_IL_KHR.load(std::sync::atomic::Ordering::Acquire);
    // SAFETY: stored from the real extension lookup under this exact name.
    let f = unsafe { std::mem::transmute::<usize, opencl_sys::clCreateProgramWithILKHR_t>(addr) };
    let Some(f) = f else {
        // SAFETY: the caller's error slot or NULL.
        unsafe { set_error(errcode_ret, NO_REAL_LIBRARY) };
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's arguments, passed through.
    let program = unsafe { f(context, il, length, errcode_ret) };
    created(Kind::Program, program, 0)
}
