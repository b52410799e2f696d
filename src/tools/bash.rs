//! Placeholder: owned by a helper, replaced before merge.
use super::{Exec, ToolOutput};
use crate::llm::ToolDef;
use serde_json::Value;
pub fn spec() -> ToolDef {
    todo!()
}
pub async fn run(_input: &Value, _exec: &dyn Exec) -> ToolOutput {
    todo!()
}
