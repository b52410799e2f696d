//! The loop's one way out: events go to the consumer as they happen, and
//! the ones worth keeping go to the session's event log.

use serde_json::Value;

use super::event::Event;
use crate::llm::StreamEvent;
use crate::session::Session;

/// Hands events to the consumer and stores the ones worth keeping.
pub(super) struct Emitter<'a> {
    pub(super) on_event: &'a mut (dyn FnMut(&Event) + Send),
}

impl Emitter<'_> {
    pub(super) fn emit(&mut self, session: &Session, message_id: Option<&str>, event: Event) {
        self.store(session, message_id, &event);
        (self.on_event)(&event);
    }

    pub(super) fn store(&self, session: &Session, message_id: Option<&str>, event: &Event) {
        if !event.is_persisted() {
            return;
        }
        let details = serde_json::to_value(event).unwrap_or(Value::Null);
        // The event log is a record, not a dependency: a failed insert must
        // not stop the run; the message rows stay authoritative.
        let _ = session.record_event(message_id, event.name(), &details);
    }
}

/// The live event for a stream event; the start of a streamed tool call is
/// announced later, with its complete input, as `ToolCallStart`.
pub(super) fn stream_event(event: StreamEvent) -> Option<Event> {
    match event {
        StreamEvent::TextDelta(text) => Some(Event::TextDelta { text }),
        StreamEvent::ThinkingDelta(text) => Some(Event::ThinkingDelta { text }),
        StreamEvent::ToolUseStart { .. } => None,
        StreamEvent::Retry {
            attempt,
            delay_ms,
            reason,
        } => Some(Event::Retry {
            attempt,
            delay_ms,
            reason,
        }),
    }
}
