//! Reads the literal tables of a Python module without running Python: top-level
//! `NAME = <literal>`, `NAME[<key>] = <literal or NAME[<key>]>` and `del NAME[<key>]`
//! statements, where a literal is made of strings (adjacent ones concatenated, triple-quoted
//! included), numbers, `True`/`False`/`None`, lists, tuples, sets, dicts and `range(a, b)`.
//! Every other statement (imports, calls, comprehensions) is skipped whole, so a table built
//! by code is simply absent — callers ask for the names they need and get a clear error.
//!
//! Used for ALFWorld's `constants.py` and `goal_library.py`. Sets become JSON arrays in source
//! order; dict keys are their string form.

use crate::EnvError;
use serde_json::{Map, Value};

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Str(String),
    Num(f64),
    Op(char),
    /// End of a logical line (outside brackets, not after `\`).
    Newline,
}

fn lex(src: &str) -> crate::Result<Vec<(Tok, usize)>> {
    let b: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut depth) = (0usize, 1usize, 0i32);
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        match c {
            '\n' => {
                if depth == 0 && !matches!(out.last(), Some((Tok::Newline, _)) | None) {
                    out.push((Tok::Newline, line));
                }
                line += 1;
                i += 1;
            }
            '\\' if b.get(i + 1) == Some(&'\n') => {
                line += 1;
                i += 2;
            }
            '#' => {
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
            }
            c if c.is_whitespace() => i += 1,
            '\'' | '"' => {
                let start_line = line;
                let triple = b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c);
                i += if triple { 3 } else { 1 };
                let mut s = String::new();
                loop {
                    let Some(&d) = b.get(i) else {
                        return Err(EnvError::Alfworld(format!(
                            "line {start_line}: unterminated string"
                        )));
                    };
                    if d == '\\' {
                        let e = *b.get(i + 1).unwrap_or(&'\\');
                        match e {
                            'n' => s.push('\n'),
                            't' => s.push('\t'),
                            '\n' => line += 1,
                            other => s.push(other),
                        }
                        i += 2;
                        continue;
                    }
                    if d == c && (!triple || (b.get(i + 1) == Some(&c) && b.get(i + 2) == Some(&c)))
                    {
                        i += if triple { 3 } else { 1 };
                        break;
                    }
                    if d == '\n' {
                        if !triple {
                            return Err(EnvError::Alfworld(format!(
                                "line {line}: newline in a string"
                            )));
                        }
                        line += 1;
                    }
                    s.push(d);
                    i += 1;
                }
                // Adjacent literals concatenate.
                if let Some((Tok::Str(prev), _)) = out.last_mut() {
                    prev.push_str(&s);
                } else {
                    out.push((Tok::Str(s), start_line));
                }
            }
            c if c.is_ascii_digit() => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == '.' || b[i] == '_') {
                    i += 1;
                }
                let text: String = b[start..i].iter().filter(|&&c| c != '_').collect();
                // Numbers we cannot read (hex, complex) become NaN; no table we use has them.
                out.push((Tok::Num(text.parse().unwrap_or(f64::NAN)), line));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                out.push((Tok::Name(b[start..i].iter().collect()), line));
            }
            c => {
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth -= 1,
                    _ => {}
                }
                out.push((Tok::Op(c), line));
                i += 1;
            }
        }
    }
    out.push((Tok::Newline, line));
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [(Tok, usize)],
    pos: usize,
    names: &'a Map<String, Value>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(t, _)| t.clone());
        self.pos += 1;
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Op(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Option<()> {
        self.eat(c).then_some(())
    }

    /// A literal, or `NAME[key]` naming an earlier table entry.
    fn value(&mut self) -> Option<Value> {
        match self.next()? {
            Tok::Str(s) => Some(Value::String(s)),
            Tok::Num(n) => {
                if n.fract() == 0.0 && n.abs() < 1e15 {
                    Some(Value::from(n as i64))
                } else {
                    serde_json::Number::from_f64(n).map(Value::Number)
                }
            }
            Tok::Op('-') => match self.next()? {
                Tok::Num(n) => serde_json::Number::from_f64(-n).map(Value::Number),
                _ => None,
            },
            Tok::Name(n) => match n.as_str() {
                "True" => Some(Value::Bool(true)),
                "False" => Some(Value::Bool(false)),
                "None" => Some(Value::Null),
                "range" => {
                    self.expect('(')?;
                    let a = self.value()?.as_i64()?;
                    self.expect(',')?;
                    let b = self.value()?.as_i64()?;
                    self.expect(')')?;
                    Some(Value::Array((a..b).map(Value::from).collect()))
                }
                _ => {
                    let table = self.names.get(&n)?.clone();
                    self.expect('[')?;
                    let key = key_string(&self.value()?);
                    self.expect(']')?;
                    table.get(&key).cloned()
                }
            },
            Tok::Op('[') => self.sequence(']').map(Value::Array),
            Tok::Op('(') => self.sequence(')').map(Value::Array),
            Tok::Op('{') => {
                if self.eat('}') {
                    return Some(Value::Object(Map::new()));
                }
                let first = self.value()?;
                if self.eat(':') {
                    let mut m = Map::new();
                    let v = self.value()?;
                    m.insert(key_string(&first), v);
                    while self.eat(',') {
                        if self.eat('}') {
                            return Some(Value::Object(m));
                        }
                        let k = self.value()?;
                        self.expect(':')?;
                        let v = self.value()?;
                        m.insert(key_string(&k), v);
                    }
                    self.expect('}')?;
                    Some(Value::Object(m))
                } else {
                    let mut items = vec![first];
                    while self.eat(',') {
                        if self.eat('}') {
                            return Some(Value::Array(items));
                        }
                        items.push(self.value()?);
                    }
                    self.expect('}')?;
                    Some(Value::Array(items))
                }
            }
            _ => None,
        }
    }

    fn sequence(&mut self, close: char) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.value()?);
            if !self.eat(',') {
                self.expect(close)?;
                return Some(items);
            }
        }
    }
}

fn key_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The tables a module's top-level literal statements define, in the order Python would
/// leave them. Errors only for text that cannot be tokenised (an unterminated string).
pub fn module_tables(src: &str) -> crate::Result<Map<String, Value>> {
    let toks = lex(src)?;
    let mut names = Map::new();
    let mut start = 0;
    while start < toks.len() {
        let end = start
            + toks[start..]
                .iter()
                .position(|(t, _)| *t == Tok::Newline)
                .unwrap_or(toks.len() - start);
        statement(&toks[start..end], &mut names);
        start = end + 1;
    }
    Ok(names)
}

fn statement(stmt: &[(Tok, usize)], names: &mut Map<String, Value>) {
    let snapshot = names.clone();
    let mut p = Parser {
        toks: stmt,
        pos: 0,
        names: &snapshot,
    };
    let Some(Tok::Name(first)) = p.next() else {
        return;
    };
    let whole = |p: &Parser<'_>| p.pos == stmt.len();
    if first == "del" {
        let Some(Tok::Name(table)) = p.next() else {
            return;
        };
        let key = (|| {
            p.expect('[')?;
            let k = key_string(&p.value()?);
            p.expect(']')?;
            Some(k)
        })();
        if let (Some(k), true, Some(Value::Object(m))) = (key, whole(&p), names.get_mut(&table)) {
            m.shift_remove(&k);
        }
        return;
    }
    let key = if p.eat('[') {
        let Some(k) = p.value() else { return };
        if !p.eat(']') {
            return;
        }
        Some(key_string(&k))
    } else {
        None
    };
    if !p.eat('=') || p.peek() == Some(&Tok::Op('=')) {
        return;
    }
    let Some(v) = p.value() else { return };
    if !whole(&p) {
        return;
    }
    match key {
        None => {
            names.insert(first, v);
        }
        Some(k) => {
            if let Some(Value::Object(m)) = names.get_mut(&first) {
                m.insert(k, v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_literal_tables_and_skips_code() {
        let src = r#"
from collections import OrderedDict
import os
A = ['x', 'y',
     'z']  # a comment
B = {'k': {'a', 'b'}, "j": ('p' 'q', 2)}
B['alias'] = B['k']
del B['j']
C = sorted(A)
D = \
{
    'pddl': '''
        (:goal (and (#x))
    ''',
    'n': -1.5,
}
E = range(1, 4)
F = None
G = {}
G["t"] = \
    {'templates': ['put a {obj} in {recep}', "it's"]}
"#;
        let t = module_tables(src).unwrap();
        assert_eq!(t["A"], serde_json::json!(["x", "y", "z"]));
        assert_eq!(
            t["B"],
            serde_json::json!({"k": ["a", "b"], "alias": ["a", "b"]})
        );
        assert!(!t.contains_key("C"));
        assert_eq!(t["D"]["pddl"], "\n        (:goal (and (#x))\n    ");
        assert_eq!(t["D"]["n"], -1.5);
        assert_eq!(t["E"], serde_json::json!([1, 2, 3]));
        assert_eq!(t["F"], Value::Null);
        assert_eq!(t["G"]["t"]["templates"][1], "it's");
    }

    #[test]
    fn unterminated_string_names_the_line() {
        let err = module_tables("A = 1\nB = 'oops\n").unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
