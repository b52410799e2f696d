//! The stream sanitizer: local models served behind OpenAI-compatible APIs
//! leak their chat template's control tokens into the text, e.g.
//! `<|channel|>commentary to=functions.bash<|message|>{"command":"ls"}<|call|>`
//! (gpt-oss), `<|start|>`, `<|end|>`, `<|im_end|>`, `<|eot_id|>`.
//! A [`Sanitizer`] removes them from the text as it streams, so they are
//! neither shown nor stored, and turns a call framed by them that carries a
//! complete JSON object into a [`SentinelCall`] (the provider makes it a
//! real tool call).
//!
//! What is removed, outside fenced code blocks:
//! - every token `<|NAME|>` (NAME: 1–32 letters, digits or `_`);
//! - a message header: what follows `<|start|>` or `<|channel|>` (or
//!   `<|start_header_id|>`) up to `<|message|>` (or `<|end_header_id|>`), an
//!   end token, or the end of the line;
//! - a call's body: after a header naming a recipient (`to=functions.bash`),
//!   the JSON object that follows `<|message|>`.
//!
//! Text inside ```` ``` ```` fences (a line starting with three or more
//! backticks, up to three spaces in, opens one; a line starting with at
//! least as many closes it) passes verbatim, tokens included.
//!
//! The filter is chunking-invariant: it reads one byte at a time and only
//! stops to wait for more input where what it has seen cannot be decided
//! yet (a possible token start `<|ab`, or backticks at the start of a line
//! whose run may still grow); only that undecided suffix is held.
//! [`Sanitizer::finish`] decides it as the end of the stream.

/// Longest token name recognised (`start_header_id` is 15).
const MAX_TOKEN_NAME: usize = 32;
/// How much of a header is kept to find its recipient; the rest is dropped
/// all the same.
const MAX_HEADER: usize = 512;

/// A tool call the model wrote as text between control tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct SentinelCall {
    pub name: String,
    pub input: serde_json::Value,
}

/// Where in the stream the filter is.
#[derive(Debug, Clone, PartialEq)]
enum Mode {
    /// Ordinary text: shown, except tokens.
    Text,
    /// Inside a fence opened by `ticks` backticks: shown verbatim.
    Fence { ticks: usize },
    /// A message header: dropped, kept (up to [`MAX_HEADER`]) to find a
    /// recipient.
    Header { header: Vec<u8> },
    /// A call's body: collected until its JSON object is complete.
    Body { name: String, body: Body },
}

/// A JSON object while it streams: enough state to know where it ends.
#[derive(Debug, Clone, PartialEq, Default)]
struct Body {
    bytes: Vec<u8>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The body did not start with `{`: dropped up to the next token.
    invalid: bool,
}

/// What a control token does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// Starts a header (`start`, `channel`, `start_header_id`).
    Header,
    /// Ends a header; the message body follows (`message`, `end_header_id`).
    Message,
    /// Stays in the header (`constrain`).
    InHeader,
    /// Anything else (`end`, `call`, `return`, `im_end`, `eot_id`, …):
    /// ends a header or a body.
    Other,
}

impl Token {
    fn of(name: &[u8]) -> Token {
        match name {
            b"start" | b"channel" | b"start_header_id" => Token::Header,
            b"message" | b"end_header_id" => Token::Message,
            b"constrain" => Token::InHeader,
            _ => Token::Other,
        }
    }
}

/// What the bytes at a position turned out to be.
enum Seen {
    /// More input is needed to tell.
    Undecided,
    /// A control token of this many bytes.
    Token(Token, usize),
    /// Not a token: the `<` is text.
    Literal,
}

/// The streaming filter. Feed pieces with [`Sanitizer::push`], then call
/// [`Sanitizer::finish`] once.
#[derive(Debug)]
pub struct Sanitizer {
    mode: Mode,
    /// The undecided end of what was pushed.
    held: Vec<u8>,
    /// Whether the last byte shown ended a line (or nothing was shown yet).
    line_start: bool,
    calls: Vec<SentinelCall>,
}

impl Default for Sanitizer {
    fn default() -> Sanitizer {
        Sanitizer {
            mode: Mode::Text,
            held: Vec::new(),
            line_start: true,
            calls: Vec::new(),
        }
    }
}

impl Sanitizer {
    /// The text of everything pushed so far that can be shown now.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.extend_from_slice(piece.as_bytes());
        self.run(false)
    }

    /// Decides what is still held as the end of the stream (a call whose
    /// body is complete JSON counts), and returns what is left to show.
    pub fn finish(&mut self) -> String {
        let shown = self.run(true);
        if let Mode::Body { name, body } = std::mem::replace(&mut self.mode, Mode::Text) {
            self.complete(name, &body);
        }
        shown
    }

    /// The calls found so far, in order, taken out.
    pub fn take_calls(&mut self) -> Vec<SentinelCall> {
        std::mem::take(&mut self.calls)
    }

    /// What is held back, waiting for more input.
    #[cfg(test)]
    pub fn held(&self) -> &[u8] {
        &self.held
    }

    /// Consumes as much of `held` as can be decided; `end` decides the rest.
    fn run(&mut self, end: bool) -> String {
        let input = std::mem::take(&mut self.held);
        let mut out = Vec::new();
        let mut at = 0;
        while at < input.len() {
            let rest = &input[at..];
            let used = match self.mode {
                Mode::Text | Mode::Fence { .. }
                    if self.line_start && matches!(rest[0], b' ' | b'`') =>
                {
                    match self.line_prefix(rest, end) {
                        Some(used) => {
                            self.show(&mut out, &rest[..used]);
                            used
                        }
                        None => break,
                    }
                }
                Mode::Fence { .. } => {
                    let used = rest
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(rest.len(), |n| n + 1);
                    self.show(&mut out, &rest[..used]);
                    used
                }
                _ if rest[0] == b'<' && self.tokens_count() => match token(rest, end) {
                    Seen::Undecided => break,
                    Seen::Token(token, len) => {
                        self.token(token);
                        len
                    }
                    Seen::Literal => {
                        self.plain(&mut out, b'<');
                        1
                    }
                },
                _ => {
                    self.plain(&mut out, rest[0]);
                    1
                }
            };
            at += used;
        }
        self.held = input[at..].to_vec();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Whether a `<` may start a token here: everywhere but inside a
    /// fence or a JSON string.
    fn tokens_count(&self) -> bool {
        !matches!(&self.mode, Mode::Body { body, .. } if body.in_string)
    }

    /// At the start of a line in text or a fence, on a space or a backtick:
    /// how many bytes of indent and backticks to show before going on,
    /// opening or closing a fence if they make one; `None` when the run may
    /// still grow.
    fn line_prefix(&mut self, rest: &[u8], end: bool) -> Option<usize> {
        let spaces = rest.iter().take(3).take_while(|&&b| b == b' ').count();
        let ticks = rest[spaces..].iter().take_while(|&&b| b == b'`').count();
        let run = spaces + ticks;
        if run == rest.len() && !end {
            return None;
        }
        match self.mode {
            Mode::Text if ticks >= 3 => self.mode = Mode::Fence { ticks },
            Mode::Fence { ticks: open } if ticks >= open => self.mode = Mode::Text,
            _ => {}
        }
        Some(run)
    }

    /// One byte outside a fence that is not a token.
    fn plain(&mut self, out: &mut Vec<u8>, byte: u8) {
        match &mut self.mode {
            Mode::Text => self.show(out, &[byte]),
            Mode::Header { header } => {
                if byte == b'\n' {
                    // Headers are one line: this one was not closed.
                    self.mode = Mode::Text;
                    self.show(out, b"\n");
                } else if header.len() < MAX_HEADER {
                    header.push(byte);
                }
            }
            Mode::Body { body, .. } => {
                if body.feed(byte)
                    && let Mode::Body { name, body } = std::mem::replace(&mut self.mode, Mode::Text)
                {
                    self.complete(name, &body);
                }
            }
            Mode::Fence { .. } => self.show(out, &[byte]),
        }
    }

    fn show(&mut self, out: &mut Vec<u8>, bytes: &[u8]) {
        if let Some(&last) = bytes.last() {
            out.extend_from_slice(bytes);
            self.line_start = last == b'\n';
        }
    }

    /// A control token outside a fence: dropped; it may change the mode.
    fn token(&mut self, token: Token) {
        let mode = std::mem::replace(&mut self.mode, Mode::Text);
        self.mode = match (mode, token) {
            (Mode::Header { mut header }, Token::Header | Token::InHeader) => {
                header.push(b' ');
                Mode::Header { header }
            }
            (Mode::Header { header }, Token::Message) => match recipient(&header) {
                Some(name) => Mode::Body {
                    name,
                    body: Body::default(),
                },
                None => Mode::Text,
            },
            (Mode::Body { name, body }, next) => {
                self.complete(name, &body);
                match next {
                    Token::Header => Mode::Header { header: Vec::new() },
                    _ => Mode::Text,
                }
            }
            (_, Token::Header) => Mode::Header { header: Vec::new() },
            (mode @ (Mode::Text | Mode::Fence { .. }), _) => mode,
            (Mode::Header { .. }, Token::Other) => Mode::Text,
        };
    }

    /// A body ended: a complete JSON object is a call, anything else is
    /// dropped.
    fn complete(&mut self, name: String, body: &Body) {
        if body.invalid || body.depth != 0 {
            return;
        }
        if let Ok(input @ serde_json::Value::Object(_)) = serde_json::from_slice(&body.bytes) {
            self.calls.push(SentinelCall { name, input });
        }
    }
}

impl Body {
    /// Takes one byte; true once the object is closed.
    fn feed(&mut self, byte: u8) -> bool {
        if self.invalid {
            return false;
        }
        if self.bytes.is_empty() {
            if byte.is_ascii_whitespace() {
                return false;
            }
            if byte != b'{' {
                self.invalid = true;
                return false;
            }
        }
        self.bytes.push(byte);
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return false;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                return self.depth == 0;
            }
            _ => {}
        }
        false
    }
}

/// Whether `rest` (starting with `<`) is a control token.
fn token(rest: &[u8], end: bool) -> Seen {
    let undecided = if end { Seen::Literal } else { Seen::Undecided };
    match rest.get(1) {
        None => return undecided,
        Some(b'|') => {}
        Some(_) => return Seen::Literal,
    }
    let name_len = rest[2..]
        .iter()
        .take(MAX_TOKEN_NAME + 1)
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if name_len > MAX_TOKEN_NAME {
        return Seen::Literal;
    }
    let after = 2 + name_len;
    match (rest.get(after), rest.get(after + 1)) {
        (None, _) => undecided,
        (Some(b'|'), None) if name_len > 0 => undecided,
        (Some(b'|'), Some(b'>')) if name_len > 0 => {
            Seen::Token(Token::of(&rest[2..after]), after + 2)
        }
        _ => Seen::Literal,
    }
}

/// The tool a header addresses: `to=functions.NAME` or `to=NAME`.
fn recipient(header: &[u8]) -> Option<String> {
    let header = String::from_utf8_lossy(header);
    let target = header
        .split_whitespace()
        .find_map(|word| word.strip_prefix("to="))?;
    let name = target.strip_prefix("functions.").unwrap_or(target);
    let name: String = name
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests;
