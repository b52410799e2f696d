//! What the mock recorded of one request, with accessors for the parts
//! tests read: headers, the system prompt, the conversation, the tool
//! result, the agent.

use std::collections::BTreeMap;

use serde_json::Value;

use super::agents;

/// One request the mock received, in arrival order.
#[derive(Debug, Clone)]
pub(crate) struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lowercase; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    /// The JSON body; `Value::Null` when the body was empty or not JSON.
    pub body: Value,
}

impl RecordedRequest {
    /// The value of header `name` (any case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The conversation the request sent (`messages` of the body).
    ///
    /// # Panics
    /// If the body has no `messages` array.
    pub(crate) fn messages(&self) -> &[Value] {
        self.body["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("no messages in {}", self.body))
    }

    /// The last message of [`RecordedRequest::messages`].
    ///
    /// # Panics
    /// If there is none.
    pub(crate) fn last_message(&self) -> &Value {
        self.messages()
            .last()
            .unwrap_or_else(|| panic!("no messages in {}", self.body))
    }

    /// The tool result the request reports (Messages API): the first block
    /// of the last message, which must be a user message's `tool_result`.
    ///
    /// # Panics
    /// If the last message is not that.
    pub(crate) fn tool_result(&self) -> &Value {
        let last = self.last_message();
        assert_eq!(last["role"], "user", "not a tool result: {last}");
        assert_eq!(
            last["content"][0]["type"], "tool_result",
            "not a tool result: {last}"
        );
        &last["content"][0]
    }

    /// The text of [`RecordedRequest::tool_result`]: what the tool told the
    /// model.
    ///
    /// # Panics
    /// If there is no tool result or its content is not text.
    pub(crate) fn told(&self) -> String {
        let result = self.tool_result();
        result["content"]
            .as_str()
            .unwrap_or_else(|| panic!("tool result without text: {result}"))
            .to_string()
    }

    /// The system prompt the request sent, whole: the `system` field (text
    /// or blocks) on the Messages API, the `system` messages on Chat
    /// Completions.
    pub(crate) fn system(&self) -> String {
        agents::system_texts(&self.body).join("\n")
    }

    /// The agent whose request this is: `NAME` of the marker "You are the
    /// agent `NAME`" in its system prompt (the `system` field, text or
    /// blocks, on the Messages API; the `system` messages on Chat
    /// Completions); `None` without one.
    pub(crate) fn agent(&self) -> Option<String> {
        agents::agent_in(&self.body)
    }
}
