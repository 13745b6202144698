//! A reader for the PDDL problem files ALFWorld games use (`initial_state.pddl`, the problem
//! part of `game.tw-pddl`): s-expressions, `(:objects a b - type …)`, `(:init (fact …) …)` and
//! `(:goal …)`. `;` starts a comment; symbols keep their case (the engine lowercases ids).

use std::path::Path;

use crate::error::{EnvError, Result};

/// An s-expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sexp {
    Atom(String),
    List(Vec<Sexp>),
}

impl Sexp {
    pub fn atom(&self) -> Option<&str> {
        match self {
            Sexp::Atom(a) => Some(a),
            Sexp::List(_) => None,
        }
    }

    pub fn list(&self) -> Option<&[Sexp]> {
        match self {
            Sexp::List(l) => Some(l),
            Sexp::Atom(_) => None,
        }
    }
}

/// Parses one s-expression; errors name the line.
pub fn parse_sexp(text: &str) -> crate::Result<Sexp> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '(' => stack.push(Vec::new()),
            ')' => {
                if stack.len() == 1 {
                    return Err(EnvError::Alfworld(format!("line {line}: unbalanced `)`")));
                }
                let done = stack.pop().expect("checked above");
                stack
                    .last_mut()
                    .expect("checked above")
                    .push(Sexp::List(done));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || n == '(' || n == ')' || n == ';' {
                        break;
                    }
                    atom.push(n);
                    chars.next();
                }
                stack.last_mut().expect("non-empty").push(Sexp::Atom(atom));
            }
        }
    }
    if stack.len() != 1 {
        return Err(EnvError::Alfworld(format!(
            "end of file: {} unclosed `(`",
            stack.len() - 1
        )));
    }
    let mut root = stack.pop().expect("root");
    match root.len() {
        1 => Ok(root.remove(0)),
        0 => Err(EnvError::Alfworld("empty file".into())),
        n => Err(EnvError::Alfworld(format!(
            "{n} top-level expressions, expected one `(define …)`"
        ))),
    }
}

/// A PDDL problem.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// `(id, type)` in file order.
    pub objects: Vec<(String, String)>,
    /// Ground facts of `:init`, each `[predicate, arg…]`.
    pub init: Vec<Vec<String>>,
    pub goal: Option<Sexp>,
}

impl Problem {
    /// The declared ids that occur in some `:init` fact — the entities TextWorld knows (a
    /// declared but unused id, e.g. a type nothing refers to, gets no name there).
    pub fn entities(&self) -> Vec<&str> {
        let used: std::collections::HashSet<&str> = self
            .init
            .iter()
            .flat_map(|f| f[1..].iter().map(String::as_str))
            .collect();
        self.objects
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| used.contains(id))
            .collect()
    }

    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| EnvError::file(path, format!("cannot read: {e}")))?;
        Self::parse(&text).map_err(|m| EnvError::file(path, m.to_string()))
    }

    pub fn parse(text: &str) -> crate::Result<Self> {
        let root = parse_sexp(text)?;
        let items = root
            .list()
            .filter(|l| l.first().and_then(Sexp::atom) == Some("define"))
            .ok_or_else(|| EnvError::Alfworld("expected `(define (problem …) …)`".into()))?;
        let mut p = Problem {
            objects: Vec::new(),
            init: Vec::new(),
            goal: None,
        };
        for section in &items[1..] {
            let Some(l) = section.list() else { continue };
            match l.first().and_then(Sexp::atom) {
                Some(":objects") => {
                    let mut pending = Vec::new();
                    let mut it = l[1..].iter();
                    while let Some(s) = it.next() {
                        let a = s
                            .atom()
                            .ok_or_else(|| EnvError::Alfworld("`:objects` holds a list".into()))?;
                        if a == "-" {
                            let ty = it.next().and_then(Sexp::atom).ok_or_else(|| {
                                EnvError::Alfworld("`-` without a type in `:objects`".into())
                            })?;
                            for id in pending.drain(..) {
                                p.objects.push((id, ty.to_owned()));
                            }
                        } else {
                            pending.push(a.to_owned());
                        }
                    }
                    for id in pending {
                        p.objects.push((id, "object".into()));
                    }
                }
                Some(":init") => {
                    for fact in &l[1..] {
                        let f = fact.list().ok_or_else(|| {
                            EnvError::Alfworld("`:init` holds an atom where a fact belongs".into())
                        })?;
                        // Numeric fluents (`(= (total-cost) 0)`) are the planner's business.
                        if f.first().and_then(Sexp::atom) == Some("=") {
                            continue;
                        }
                        if f.is_empty() {
                            return Err(EnvError::Alfworld(
                                "an empty fact `()` in `:init` (a fact starts with its predicate)"
                                    .into(),
                            ));
                        }
                        let words: Option<Vec<String>> =
                            f.iter().map(|s| s.atom().map(str::to_owned)).collect();
                        p.init.push(words.ok_or_else(|| {
                            EnvError::Alfworld("nested list in an `:init` fact".into())
                        })?);
                    }
                }
                Some(":goal") => p.goal = l.get(1).cloned(),
                _ => {}
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_objects_init_goal() {
        let p = Problem::parse(
            "; a comment\n(define (problem p) (:domain alfred)\n (:objects a1 - agent M1 M2 - object L)\n \
             (:init (atLocation a1 L) (opened M1))\n (:goal (exists (?o - object) (isHot ?o))))",
        )
        .unwrap();
        assert_eq!(
            p.objects,
            vec![
                ("a1".into(), "agent".into()),
                ("M1".into(), "object".into()),
                ("M2".into(), "object".into()),
                ("L".into(), "object".into())
            ]
        );
        assert_eq!(p.init[0], vec!["atLocation", "a1", "L"]);
        assert!(p.goal.is_some());
    }

    #[test]
    fn errors_name_the_line() {
        let err = Problem::parse("(define (problem p)\n (:init (a b)))\n)")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 3"), "{err}");
        let err = Problem::parse("(define (problem p)\n (:init (a b)")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unclosed"), "{err}");
    }
}
