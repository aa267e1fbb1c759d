//! Streaming generation with cancel (`litert_lm_conversation_send_message_stream` and
//! `litert_lm_conversation_cancel_process`).
//!
//! The library calls back from its own thread, once per decoded chunk, and ends the stream with a
//! final chunk or an error chunk (a cancel ends it with a `CANCELLED` error). Up to 0.14 the
//! callback gets the chunk's text, a final flag and an error as arguments ([`on_text`]); from
//! 0.15 it gets a chunk object read through `stream_chunk_get_*` ([`on_chunk`]). The callback counts
//! the chunks and requests the cancel itself when the K-th arrives: the tiny models decode faster
//! than a round trip to the calling thread, which would let the generation finish first. The
//! calling thread waits for the end of the stream, because the callback state must outlive every
//! callback. If the stream never ends within the timeout that state is leaked on purpose: freeing
//! it while the library may still call back would be a use-after-free.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::engine::litert_lm::error::CallError;
use crate::engine::litert_lm::ffi::{opt_str, Api, RawConversation, RawStreamChunk, StreamFn};
use crate::engine::litert_lm::handles::{Conversation, OptionalArgs};

/// What a streamed generation produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamOutcome {
    /// Chunks with text, one per decode step.
    pub tokens: u32,
    /// The stream ended because leakloop cancelled it.
    pub cancelled: bool,
}

/// What the callback saw in one chunk.
#[derive(Debug)]
enum Event {
    Text,
    Final,
    Error(String),
}

/// The state the library hands back to [`on_chunk`].
struct Sink {
    api: &'static Api,
    events: mpsc::Sender<Event>,
    conversation: *mut RawConversation,
    cancel_after: Option<u32>,
    chunks: AtomicU32,
    cancel_requested: AtomicBool,
}

/// The chunk callback leakloop registers with libraries from 0.15 on.
unsafe extern "C" fn on_chunk(data: *mut c_void, chunk: *const RawStreamChunk) {
    // SAFETY: `data` is the `Sink` that `stream_message` keeps alive until the stream has ended
    // (or leaks, if it never ends).
    let sink = unsafe { &*(data as *const Sink) };
    let api = sink.api;
    // SAFETY: `chunk` is valid for the duration of this callback; strings are copied at once.
    let (error, text, last) = unsafe {
        (
            opt_str(api.chunk_error(chunk)),
            opt_str(api.chunk_text(chunk)),
            api.chunk_is_final(chunk),
        )
    };
    sink.take(error, text, last);
}

/// The text callback leakloop registers with libraries up to 0.14.
unsafe extern "C" fn on_text(
    data: *mut c_void,
    text: *const std::ffi::c_char,
    is_final: bool,
    error: *const std::ffi::c_char,
) {
    // SAFETY: as in `on_chunk`.
    let sink = unsafe { &*(data as *const Sink) };
    // SAFETY: NULL or strings valid for the duration of this callback, copied at once.
    let (error, text) = unsafe { (opt_str(error), opt_str(text)) };
    sink.take(error, text, is_final);
}

impl Sink {
    /// Handles one chunk, whichever callback form delivered it.
    fn take(&self, error: Option<String>, text: Option<String>, last: bool) {
        // The receiver may be gone after a timeout: nothing left to tell then.
        if let Some(error) = error {
            let _ = self.events.send(Event::Error(error));
            return;
        }
        if text.is_some_and(|t| !t.is_empty()) {
            let n = self.chunks.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(cancel) = self
                .api
                .conversation_cancel_process
                .filter(|_| self.cancel_after.is_some_and(|k| n >= k))
            {
                if !self.cancel_requested.swap(true, Ordering::SeqCst) {
                    // SAFETY: the conversation outlives the stream (`stream_message` holds it
                    // borrowed until the stream has ended); cancelling only sets a flag the
                    // decode loop checks.
                    unsafe { cancel(self.conversation) };
                }
            }
            let _ = self.events.send(Event::Text);
        }
        if last {
            let _ = self.events.send(Event::Final);
        }
    }
}

/// Sends `message_json`, streams the reply and cancels it after `cancel_after` chunks. The
/// caller checks that the library streams and cancels first (`Capabilities::refusal`); a library
/// without them is an error here, never a blocking call in disguise.
pub(crate) fn stream_message(
    conversation: &mut Conversation,
    message_json: &str,
    args: Option<&OptionalArgs>,
    cancel_after: Option<u32>,
    timeout: Duration,
) -> Result<StreamOutcome, CallError> {
    const CALL: &str = "litert_lm_conversation_send_message_stream";
    let api = conversation.api();
    let Some(stream) = api.stream else {
        return Err(CallError::new(
            CALL,
            "this LiteRT-LM build does not export it (no streaming)",
        ));
    };
    if cancel_after.is_some() && api.conversation_cancel_process.is_none() {
        return Err(CallError::new(
            "litert_lm_conversation_cancel_process",
            "this LiteRT-LM build does not export it (no cancel)",
        ));
    }
    let message = std::ffi::CString::new(message_json)
        .map_err(|_| CallError::new(CALL, "message contains a NUL byte"))?;
    let (tx, rx) = mpsc::channel();
    let sink = Box::into_raw(Box::new(Sink {
        api,
        events: tx,
        conversation: conversation.as_ptr(),
        cancel_after,
        chunks: AtomicU32::new(0),
        cancel_requested: AtomicBool::new(false),
    }));
    // SAFETY: a live conversation, C strings and optional args that outlive the call (the library
    // copies the message before returning), and a callback whose state stays valid until the
    // stream ends.
    let (conv, msg, ctx) = (conversation.as_ptr(), message.as_ptr(), c"{}".as_ptr());
    let args = OptionalArgs::ptr_or_null(args);
    let rc = unsafe {
        match stream {
            StreamFn::TextPlain(f) => f(conv, msg, ctx, on_text, sink.cast()),
            StreamFn::Text(f) => f(conv, msg, ctx, args, on_text, sink.cast()),
            StreamFn::Chunk(f) => f(conv, msg, ctx, args, on_chunk, sink.cast()),
        }
    };
    if rc != 0 {
        let err = CallError::from_library(api, CALL);
        // SAFETY: the stream did not start, so the library never calls back with `sink`.
        drop(unsafe { Box::from_raw(sink) });
        return Err(err);
    }

    let deadline = Instant::now() + timeout;
    let mut tokens = 0u32;

    let end = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::Text) => tokens += 1,
            Ok(Event::Final) => break Ok(false),
            Ok(Event::Error(e)) if is_cancellation(&e) => break Ok(true),
            Ok(Event::Error(e)) if is_length_stop(&e) => break Ok(false),
            Ok(Event::Error(e)) => break Err(CallError::new(CALL, e)),
            Err(_) => {
                // The library may still call back: `sink` must stay valid, so it is leaked.
                // SAFETY: `sink` is live (leaked from here on); the flag is atomic.
                let cancel_requested = unsafe { &*sink }.cancel_requested.load(Ordering::SeqCst);
                return Err(CallError::new(
                    CALL,
                    format!(
                        "the stream did not end within {} ms ({tokens} chunks, cancel {})",
                        timeout.as_millis(),
                        if cancel_requested {
                            "requested"
                        } else {
                            "not requested"
                        }
                    ),
                ));
            }
        }
    };
    // SAFETY: the stream has ended (final or error chunk): no further callbacks use `sink`.
    let sink = unsafe { Box::from_raw(sink) };
    let cancel_requested = sink.cancel_requested.load(Ordering::SeqCst);
    drop(sink);
    end.map(|cancelled| StreamOutcome {
        tokens,
        cancelled: cancelled && cancel_requested,
    })
}

/// The error chunk a cancel ends a stream with.
fn is_cancellation(error: &str) -> bool {
    error.to_ascii_uppercase().contains("CANCELLED")
}

/// The error chunk a generation that ran into its token limit ends with: a normal end.
fn is_length_stop(error: &str) -> bool {
    error.contains("Max number of tokens reached")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::cancelled("CANCELLED: Process cancelled.", true, false)]
    #[case::lowercase("cancelled by user", true, false)]
    #[case::length("INTERNAL: Max number of tokens reached.", false, true)]
    #[case::other("INTERNAL: out of memory", false, false)]
    fn classifies_stream_errors(#[case] e: &str, #[case] cancel: bool, #[case] length: bool) {
        assert_eq!((is_cancellation(e), is_length_stop(e)), (cancel, length));
    }
}
