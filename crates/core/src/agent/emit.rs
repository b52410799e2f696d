//! The loop's one way out: events go to the consumer as they happen, and
//! the ones worth keeping go to the session's event log. The emitter also
//! remembers the text of the model call in flight, so that an abort can keep
//! what was already streamed.

use serde_json::Value;

use crate::event::Event;
use ah_llm::StreamEvent;
use ah_session::Session;

/// Hands events to the consumer and stores the ones worth keeping.
pub(super) struct Emitter<'a> {
    on_event: &'a mut (dyn FnMut(&Event) + Send),
    /// Text streamed by the model call in flight.
    partial: String,
}

impl<'a> Emitter<'a> {
    pub(super) fn new(on_event: &'a mut (dyn FnMut(&Event) + Send)) -> Emitter<'a> {
        Emitter {
            on_event,
            partial: String::new(),
        }
    }

    pub(super) fn emit(&mut self, session: &Session, message_id: Option<&str>, event: Event) {
        record_event(session, message_id, &event);
        self.live(&event);
    }

    /// Hands an event to the consumer only (streamed events: the store is
    /// not available inside the provider's callback).
    pub(super) fn live(&mut self, event: &Event) {
        match event {
            Event::TextDelta { text } => self.partial.push_str(text),
            Event::ApiCallStart { .. } | Event::ApiCallEnd { .. } | Event::Retry { .. } => {
                self.partial.clear()
            }
            _ => {}
        }
        (self.on_event)(event);
    }

    /// The text of the unfinished model call, taken (the next call starts
    /// empty).
    pub(super) fn take_partial(&mut self) -> String {
        std::mem::take(&mut self.partial)
    }
}

/// Stores `event` in the session's event log when it is worth keeping
/// (deltas are not: the full text is in the message). The log is a record,
/// not a dependency: a failed insert does not stop the run, and the message
/// rows stay authoritative.
pub fn record_event(session: &Session, message_id: Option<&str>, event: &Event) {
    if !event.is_persisted() {
        return;
    }
    let details = serde_json::to_value(event).unwrap_or(Value::Null);
    let _ = session.record_event(message_id, event.name(), &details);
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
