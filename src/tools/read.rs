//! Placeholder: owned by a helper, replaced before merge.
use serde_json::Value;
use super::{Exec, ToolOutput};
use crate::llm::ToolDef;
pub fn spec() -> ToolDef { todo!() }
pub async fn run(_input: &Value, _exec: &dyn Exec) -> ToolOutput { todo!() }
