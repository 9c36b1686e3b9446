//! The parsed TOML document as a small tree in which every key and value keeps its byte position,
//! so that validation can point at the offending line. Built from `toml_edit`'s spanned parse.

use toml_edit::{ImDocument, Item, Table, Value};

/// A value and the byte offset where it starts (for a table: its `[header]`, or the key that
/// created it when it is implicit or dotted).
#[derive(Debug)]
pub(crate) struct Node {
    pub pos: usize,
    pub val: Val,
}

#[derive(Debug)]
pub(crate) enum Val {
    Str(String),
    Int(i64),
    Float,
    Bool(bool),
    Datetime,
    /// `tables` is true for an array of tables (`[[x]]`), false for an inline `[...]` array.
    Array {
        items: Vec<Node>,
        tables: bool,
    },
    Table(Vec<Entry>),
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub key: String,
    /// Byte offset of the key itself.
    pub key_pos: usize,
    pub node: Node,
}

impl Val {
    /// "an integer", "a string", ... as used in "expected X, found Y".
    pub fn type_name(&self) -> &'static str {
        match self {
            Val::Str(_) => "a string",
            Val::Int(_) => "an integer",
            Val::Float => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime => "a date-time",
            Val::Array { tables: true, .. } => "an array of tables",
            Val::Array { tables: false, .. } => "an array",
            Val::Table(_) => "a table",
        }
    }
}

/// Parses `text`; on a syntax error returns (byte offset, one-line message).
pub(crate) fn parse(text: &str) -> Result<Node, (usize, String)> {
    let doc = ImDocument::parse(text).map_err(|e| {
        let pos = e.span().map_or(0, |r| r.start);
        let msg: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let msg = if msg.is_empty() {
            "invalid TOML".to_string()
        } else {
            msg.join(": ")
        };
        (pos, msg)
    })?;
    Ok(Node {
        pos: 0,
        val: Val::Table(table(doc.as_table(), 0)),
    })
}

fn table(t: &Table, pos: usize) -> Vec<Entry> {
    t.iter()
        .map(|(k, item)| {
            let key_pos = t.key(k).and_then(|k| k.span()).map_or(pos, |r| r.start);
            Entry {
                key: k.to_string(),
                key_pos,
                node: item_node(item, key_pos),
            }
        })
        .collect()
}

fn item_node(item: &Item, fallback: usize) -> Node {
    match item {
        Item::None => Node {
            pos: fallback,
            val: Val::Table(Vec::new()),
        },
        Item::Value(v) => value_node(v, fallback),
        Item::Table(t) => {
            let pos = t.span().map_or(fallback, |r| r.start);
            Node {
                pos,
                val: Val::Table(table(t, pos)),
            }
        }
        Item::ArrayOfTables(a) => {
            let items = a
                .iter()
                .map(|t| {
                    let pos = t.span().map_or(fallback, |r| r.start);
                    Node {
                        pos,
                        val: Val::Table(table(t, pos)),
                    }
                })
                .collect();
            let pos = a.span().map_or(fallback, |r| r.start);
            Node {
                pos,
                val: Val::Array { items, tables: true },
            }
        }
    }
}

fn value_node(v: &Value, fallback: usize) -> Node {
    let pos = v.span().map_or(fallback, |r| r.start);
    let val = match v {
        Value::String(s) => Val::Str(s.value().clone()),
        Value::Integer(i) => Val::Int(*i.value()),
        Value::Float(_) => Val::Float,
        Value::Boolean(b) => Val::Bool(*b.value()),
        Value::Datetime(_) => Val::Datetime,
        Value::Array(a) => Val::Array {
            items: a.iter().map(|v| value_node(v, pos)).collect(),
            tables: false,
        },
        Value::InlineTable(t) => Val::Table(
            t.iter()
                .map(|(k, v)| {
                    let key_pos = t.key(k).and_then(|k| k.span()).map_or(pos, |r| r.start);
                    Entry {
                        key: k.to_string(),
                        key_pos,
                        node: value_node(v, key_pos),
                    }
                })
                .collect(),
        ),
    };
    Node { pos, val }
}

/// Maps byte offsets to 1-based line numbers.
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    pub fn line(&self, pos: usize) -> usize {
        self.starts.partition_point(|&s| s <= pos)
    }

    /// 1-based column (in bytes) of `pos`.
    pub fn column(&self, pos: usize) -> usize {
        pos - self.starts[self.line(pos) - 1] + 1
    }
}

/// `key` as it would be written in TOML: bare if it can be, else quoted.
pub(crate) fn toml_key(key: &str) -> String {
    if !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        key.to_string()
    } else {
        quote(key)
    }
}

/// `s` in double quotes with `"` and `\` and control characters escaped.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `parent.key` with the key quoted as TOML requires; `parent` empty at the top level.
pub(crate) fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        toml_key(key)
    } else {
        format!("{parent}.{}", toml_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let l = Lines::new("a\nbc\n\nd");
        assert_eq!(l.line(0), 1);
        assert_eq!(l.line(1), 1);
        assert_eq!(l.line(2), 2);
        assert_eq!(l.line(5), 3);
        assert_eq!(l.line(6), 4);
        assert_eq!(l.column(3), 2);
    }

    #[test]
    fn keys_are_quoted_only_when_needed() {
        assert_eq!(join("", "machine"), "machine");
        assert_eq!(join("knobs", "vm.swappiness"), "knobs.\"vm.swappiness\"");
        assert_eq!(join("op[1]", "order"), "op[1].order");
        assert_eq!(toml_key("a\"b"), "\"a\\\"b\"");
    }
}
