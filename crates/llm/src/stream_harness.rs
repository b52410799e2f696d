//! The test harness of every provider's stream assembler: feed it the data
//! of a stream's events, one at a time, and see what it reported and built.

use crate::sse::StreamError;
use crate::transport::StreamAssembler;
use crate::{Response, StreamEvent};

/// Feeds every event's data to `assembler` until one is refused; returns
/// the first error, the events reported and the assembler.
pub(crate) fn feed<A: StreamAssembler>(
    mut assembler: A,
    data: &[String],
) -> (Result<(), StreamError>, Vec<StreamEvent>, A) {
    let mut seen = Vec::new();
    let mut result = Ok(());
    for item in data {
        result = assembler.handle(item, &mut |event| seen.push(event));
        if result.is_err() {
            break;
        }
    }
    (result, seen, assembler)
}

/// Feeds a well-formed, complete stream and returns the response built
/// and the events reported.
pub(crate) fn assemble<A: StreamAssembler>(
    assembler: A,
    data: &[String],
) -> (Response, Vec<StreamEvent>) {
    let (result, seen, assembler) = feed(assembler, data);
    result.expect("every event is accepted");
    (assembler.finish().expect("the stream is complete"), seen)
}
