//! The mapping between stored types and table rows: [`BlockRecord`] and
//! `content_blocks` both ways, and `messages` rows to [`StoredMessage`].
//! Errors are plain reasons; the store adds the database path.

use serde_json::{Map, Value};

use super::{BlockRecord, MessageMeta, StoredMessage};
use ah_base::redact;
use ah_llm::{Block, Role, Usage};

/// The columns of one `content_blocks` row, minus its id, message and seq.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct BlockRow {
    pub block_type: String,
    pub content: Option<String>,
    pub tool_id: Option<String>,
    pub tool_name: Option<String>,
    /// JSON text.
    pub tool_input: Option<String>,
    pub tool_output: Option<String>,
    pub is_error: Option<bool>,
    pub duration_ms: Option<i64>,
    /// JSON text.
    pub details: Option<String>,
}

impl BlockRow {
    /// Reads the columns in [`super::store::BLOCKS_SQL`] order.
    pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<BlockRow> {
        Ok(BlockRow {
            block_type: row.get(0)?,
            content: row.get(1)?,
            tool_id: row.get(2)?,
            tool_name: row.get(3)?,
            tool_input: row.get(4)?,
            tool_output: row.get(5)?,
            is_error: row.get(6)?,
            duration_ms: row.get(7)?,
            details: row.get(8)?,
        })
    }
}

/// Lays a block out in columns. Fails when the record carries something its
/// block type cannot hold, so nothing is dropped silently.
pub(crate) fn block_to_row(record: &BlockRecord) -> Result<BlockRow, String> {
    let is_tool_result = matches!(record.block, Block::ToolResult { .. });
    if !is_tool_result
        && (record.tool_name.is_some()
            || record.tool_output.is_some()
            || record.duration_ms.is_some())
    {
        return Err(format!(
            "a {} block cannot carry tool_name, tool_output or duration_ms (only tool results do)",
            block_type(&record.block)
        ));
    }
    let mut row = BlockRow {
        block_type: block_type(&record.block).to_string(),
        details: record.details.as_ref().map(json_text).transpose()?,
        ..BlockRow::default()
    };
    match &record.block {
        Block::Text { text } => row.content = Some(text.clone()),
        Block::Thinking {
            thinking,
            signature,
        } => {
            row.content = Some(thinking.clone());
            row.details = Some(json_text(&with_key(
                &record.details,
                "signature",
                signature,
            )?)?);
        }
        Block::RedactedThinking { data } => {
            row.details = Some(json_text(&with_key(&record.details, "data", data)?)?);
        }
        Block::ToolUse { id, name, input } => {
            row.tool_id = Some(id.clone());
            row.tool_name = Some(name.clone());
            row.tool_input = Some(json_text(input)?);
        }
        Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => {
            row.tool_id = Some(tool_use_id.clone());
            row.tool_name = record.tool_name.clone();
            row.content = Some(content.clone());
            row.tool_output = record.tool_output.clone();
            row.is_error = Some(*is_error);
            row.duration_ms = record.duration_ms.map(to_i64);
        }
        // Stored once: the base64 in `content`, its type in the details.
        Block::Image { source } => {
            row.content = Some(source.data.clone());
            row.details = Some(json_text(&with_key(
                &record.details,
                "media_type",
                &source.media_type,
            )?)?);
        }
    }
    // No secret ah holds is ever stored (JSON text included: a secret has
    // no character JSON escapes, and the mark has none either). An image's
    // base64 is bytes, not text: left whole.
    let image = matches!(record.block, Block::Image { .. });
    for column in [
        &mut row.content,
        &mut row.tool_input,
        &mut row.tool_output,
        &mut row.details,
    ]
    .into_iter()
    .flatten()
    {
        if image {
            break;
        }
        if let std::borrow::Cow::Owned(clean) = redact::text(column) {
            *column = clean;
        }
    }
    Ok(row)
}

/// Rebuilds a block from its columns; the exact inverse of [`block_to_row`].
pub(crate) fn block_from_row(row: BlockRow) -> Result<BlockRecord, String> {
    let mut details = row
        .details
        .as_deref()
        .map(|text| {
            serde_json::from_str::<Value>(text)
                .map_err(|e| format!("details of a {} block is not JSON: {e}", row.block_type))
        })
        .transpose()?;
    let mut tool_name = None;
    let mut tool_output = None;
    let mut duration_ms = None;
    let block = match row.block_type.as_str() {
        "text" => Block::Text {
            text: required(row.content, "text", "content")?,
        },
        "thinking" => Block::Thinking {
            thinking: required(row.content, "thinking", "content")?,
            signature: take_key(&mut details, "thinking", "signature")?,
        },
        "redacted_thinking" => Block::RedactedThinking {
            data: take_key(&mut details, "redacted_thinking", "data")?,
        },
        "tool_use" => {
            let input = required(row.tool_input, "tool_use", "tool_input")?;
            Block::ToolUse {
                id: required(row.tool_id, "tool_use", "tool_id")?,
                name: required(row.tool_name, "tool_use", "tool_name")?,
                input: serde_json::from_str(&input)
                    .map_err(|e| format!("tool_input of a tool_use block is not JSON: {e}"))?,
            }
        }
        "tool_result" => {
            tool_name = row.tool_name;
            tool_output = row.tool_output;
            duration_ms = row
                .duration_ms
                .map(|ms| u64::try_from(ms).map_err(|_| format!("negative duration_ms {ms}")))
                .transpose()?;
            Block::ToolResult {
                tool_use_id: required(row.tool_id, "tool_result", "tool_id")?,
                content: required(row.content, "tool_result", "content")?,
                is_error: row.is_error.unwrap_or(false),
            }
        }
        "image" => Block::Image {
            source: ah_llm::ImageSource {
                kind: "base64".to_string(),
                media_type: take_key(&mut details, "image", "media_type")?,
                data: required(row.content, "image", "content")?,
            },
        },
        other => return Err(format!("unknown block_type {other:?}")),
    };
    Ok(BlockRecord {
        block,
        tool_name,
        tool_output,
        duration_ms,
        details,
    })
}

/// Token counts and durations are far below `i64::MAX`; saturate rather
/// than fail if one is not.
pub(crate) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn block_type(block: &Block) -> &'static str {
    match block {
        Block::Text { .. } => "text",
        Block::Thinking { .. } => "thinking",
        Block::RedactedThinking { .. } => "redacted_thinking",
        Block::ToolUse { .. } => "tool_use",
        Block::ToolResult { .. } => "tool_result",
        Block::Image { .. } => "image",
    }
}

fn json_text(value: &Value) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| format!("cannot encode JSON: {e}"))
}

/// The caller's details object with `key` set to `value`.
fn with_key(details: &Option<Value>, key: &str, value: &str) -> Result<Value, String> {
    let mut map = match details {
        None => Map::new(),
        Some(Value::Object(map)) if !map.contains_key(key) => map.clone(),
        Some(_) => {
            return Err(format!(
                "a block's details must be a JSON object without a {key:?} key (it holds the block's {key})"
            ));
        }
    };
    map.insert(key.to_string(), Value::String(value.to_string()));
    Ok(Value::Object(map))
}

/// Removes `key` from the details object and returns it; details that are
/// left empty become `None`, so a round trip gives back what was stored.
fn take_key(details: &mut Option<Value>, block_type: &str, key: &str) -> Result<String, String> {
    let Some(Value::Object(map)) = details else {
        return Err(format!("{block_type} block has no details object"));
    };
    let value = match map.remove(key) {
        Some(Value::String(value)) => value,
        _ => {
            return Err(format!(
                "{block_type} block has no string {key:?} in details"
            ));
        }
    };
    if map.is_empty() {
        *details = None;
    }
    Ok(value)
}

fn required(value: Option<String>, block_type: &str, column: &str) -> Result<String, String> {
    value.ok_or_else(|| format!("{block_type} block has no {column}"))
}

/// A `messages` row as read, before its values are checked.
pub(crate) struct MessageRow {
    pub id: String,
    pub parent_id: Option<String>,
    pub role: String,
    pub seq: i64,
    pub created_at: String,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub stop_reason: Option<String>,
    pub model: Option<String>,
    pub api_latency_ms: Option<i64>,
    pub agent: Option<String>,
}

impl MessageRow {
    /// Reads the columns in `messages` table order, as
    /// [`super::store::ANCESTRY_SQL`] returns them.
    pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRow> {
        Ok(MessageRow {
            id: row.get(0)?,
            parent_id: row.get(1)?,
            role: row.get(2)?,
            seq: row.get(3)?,
            created_at: row.get(4)?,
            input_tokens: row.get(5)?,
            output_tokens: row.get(6)?,
            stop_reason: row.get(7)?,
            model: row.get(8)?,
            api_latency_ms: row.get(9)?,
            agent: row.get(10)?,
        })
    }

    /// Checks the values and joins the message's blocks.
    pub(crate) fn into_stored(self, blocks: Vec<BlockRecord>) -> Result<StoredMessage, String> {
        let role = match self.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(format!("message {} has unknown role {other:?}", self.id)),
        };
        let count = |value: Option<i64>, column: &str| {
            value
                .map(u64::try_from)
                .transpose()
                .map_err(|_| format!("message {} has a negative {column}", self.id))
        };
        let input_tokens = count(self.input_tokens, "input_tokens")?;
        let output_tokens = count(self.output_tokens, "output_tokens")?;
        let api_latency_ms = count(self.api_latency_ms, "api_latency_ms")?;
        let usage = (input_tokens.is_some() || output_tokens.is_some()).then(|| Usage {
            input_tokens: input_tokens.unwrap_or(0),
            output_tokens: output_tokens.unwrap_or(0),
            ..Usage::default()
        });
        Ok(StoredMessage {
            id: self.id,
            parent_id: self.parent_id,
            role,
            seq: self.seq,
            created_at: self.created_at,
            meta: MessageMeta {
                usage,
                stop_reason: self.stop_reason,
                model: self.model,
                api_latency_ms,
            },
            agent: self.agent,
            blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn thinking_keeps_caller_details_beside_the_signature() {
        let record = BlockRecord {
            details: Some(json!({"budget": 1024})),
            ..BlockRecord::from(Block::Thinking {
                thinking: "hmm".into(),
                signature: "sig".into(),
            })
        };
        let row = block_to_row(&record).unwrap();
        let stored: Value = serde_json::from_str(row.details.as_deref().unwrap()).unwrap();
        assert_eq!(stored, json!({"budget": 1024, "signature": "sig"}));
        assert_eq!(block_from_row(row).unwrap(), record);
    }

    #[test]
    fn thinking_details_must_be_an_object_without_the_signature_key() {
        for details in [json!([1]), json!({"signature": "other"})] {
            let record = BlockRecord {
                details: Some(details),
                ..BlockRecord::from(Block::Thinking {
                    thinking: "t".into(),
                    signature: "s".into(),
                })
            };
            assert!(block_to_row(&record).unwrap_err().contains("signature"));
        }
    }

    #[test]
    fn an_image_is_stored_once_as_base64_with_its_type_beside_it() {
        let record = BlockRecord {
            details: Some(json!({"path": "/work/a.png"})),
            ..BlockRecord::from(Block::Image {
                source: ah_llm::ImageSource {
                    kind: "base64".into(),
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
            })
        };
        let row = block_to_row(&record).unwrap();
        assert_eq!(row.block_type, "image");
        assert_eq!(row.content.as_deref(), Some("iVBORw0KGgo="));
        assert_eq!(block_from_row(row).unwrap(), record);
    }

    #[test]
    fn tool_fields_are_refused_on_other_blocks() {
        let record = BlockRecord {
            tool_output: Some("out".into()),
            ..BlockRecord::from(Block::Text { text: "hi".into() })
        };
        assert!(
            block_to_row(&record)
                .unwrap_err()
                .contains("only tool results")
        );
    }

    #[test]
    fn bad_rows_are_reported() {
        let unknown = BlockRow {
            block_type: "video".into(),
            ..BlockRow::default()
        };
        assert!(
            block_from_row(unknown)
                .unwrap_err()
                .contains("unknown block_type")
        );
        let no_signature = BlockRow {
            block_type: "thinking".into(),
            content: Some("t".into()),
            details: Some("{}".into()),
            ..BlockRow::default()
        };
        assert!(
            block_from_row(no_signature)
                .unwrap_err()
                .contains("signature")
        );
        let bad_input = BlockRow {
            block_type: "tool_use".into(),
            tool_id: Some("t1".into()),
            tool_name: Some("bash".into()),
            tool_input: Some("{not json".into()),
            ..BlockRow::default()
        };
        assert!(block_from_row(bad_input).unwrap_err().contains("not JSON"));
    }
}
