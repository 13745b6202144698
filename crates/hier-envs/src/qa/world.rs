//! A deterministic synthetic multi-hop world: entities with types and relations,
//! encyclopedia-style documents (one per entity, plus look-alike entities and passing mentions
//! as distractors), and 1–4-hop questions with gold answers, split into train and test by the
//! seed. No answerable corpus can be downloaded here (ENVIRONMENTS.md), so this is the
//! controlled setting; the same code reads wiki-18 and the seven benchmarks' files
//! ([`super::corpus`]).
//!
//! A k-hop question follows k relations from a start entity; every hop's fact is stated in
//! exactly one document (the subject's), so answering needs k retrievals in order, e.g.
//! `In which country is the birthplace of the founder of Veltrix Works?` (3 hops: founder →
//! birthplace → country). Difficulty is the hop count.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::corpus::Document;
use crate::EnvError;

/// Sizes of a world.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldConfig {
    pub seed: u64,
    pub people: usize,
    pub cities: usize,
    pub countries: usize,
    pub organizations: usize,
    pub works: usize,
    /// Share of entities that get a look-alike distractor (a similar name, other facts).
    pub lookalike_share: f64,
    /// Passages that mention an entity in passing without stating its facts, per entity.
    pub mentions_per_entity: usize,
    /// Questions per hop count (index 0: 1 hop … index 3: 4 hops).
    pub questions_per_hop: [usize; 4],
    /// Share of questions in the test split.
    pub test_share: f64,
}

impl Default for WorldConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            people: 120,
            cities: 40,
            countries: 10,
            organizations: 30,
            works: 40,
            lookalike_share: 0.3,
            mentions_per_entity: 1,
            questions_per_hop: [150, 150, 100, 100],
            test_share: 0.2,
        }
    }
}

/// Entity kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Person,
    City,
    Country,
    Organization,
    Work,
}

/// Relations; each is a function of its subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relation {
    BornIn,
    BirthYear,
    Employer,
    Mentor,
    Country,
    Capital,
    Headquarters,
    Founder,
    Creator,
    ReleaseYear,
}

impl Relation {
    /// The noun phrase of the relation's object, `{x}` its subject.
    fn phrase(self) -> &'static str {
        match self {
            Self::BornIn => "the birthplace of {x}",
            Self::BirthYear => "the birth year of {x}",
            Self::Employer => "the employer of {x}",
            Self::Mentor => "the mentor of {x}",
            Self::Country => "the country of {x}",
            Self::Capital => "the capital of {x}",
            Self::Headquarters => "the headquarters city of {x}",
            Self::Founder => "the founder of {x}",
            Self::Creator => "the creator of {x}",
            Self::ReleaseYear => "the release year of {x}",
        }
    }

    /// The question asking for the relation's object.
    fn question(self) -> &'static str {
        match self {
            Self::BornIn => "Where was {x} born?",
            Self::BirthYear => "In which year was {x} born?",
            Self::Employer => "Which organization does {x} work for?",
            Self::Mentor => "Who was the mentor of {x}?",
            Self::Country => "In which country is {x}?",
            Self::Capital => "What is the capital of {x}?",
            Self::Headquarters => "In which city is {x} headquartered?",
            Self::Founder => "Who founded {x}?",
            Self::Creator => "Who created {x}?",
            Self::ReleaseYear => "In which year was {x} released?",
        }
    }
}

/// A relation's object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Value {
    Entity(usize),
    Year(u32),
}

/// An entity and its facts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    pub name: String,
    pub kind: Kind,
    /// A word that describes it (`painter`, `port city`, `film`, …).
    pub descriptor: String,
    pub facts: BTreeMap<Relation, Value>,
    /// A distractor: never the subject or answer of a question.
    pub lookalike: bool,
}

/// A question with its gold answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Question {
    pub id: String,
    pub question: String,
    /// Gold answers (the object's name, or the year).
    pub answer: Vec<String>,
    pub hops: usize,
    /// `train` or `test`.
    pub split: String,
    /// The relations followed, in order.
    pub relations: Vec<Relation>,
    /// Titles of the documents that state each hop's fact, in order.
    pub support: Vec<String>,
}

/// A generated world.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    pub config: WorldConfig,
    pub entities: Vec<Entity>,
    pub documents: Vec<Document>,
    pub questions: Vec<Question>,
}

const ONSETS: [&str; 20] = [
    "b", "br", "c", "d", "dr", "f", "g", "k", "l", "m", "n", "p", "r", "s", "st", "t", "v", "z",
    "th", "qu",
];
const VOWELS: [&str; 8] = ["a", "e", "i", "o", "u", "ai", "ei", "ou"];
const CODAS: [&str; 10] = ["", "", "n", "r", "s", "l", "th", "x", "nd", "m"];

fn word(rng: &mut StdRng, syllables: usize) -> String {
    let mut w = String::new();
    for _ in 0..syllables {
        w.push_str(ONSETS.choose(rng).expect("non-empty"));
        w.push_str(VOWELS.choose(rng).expect("non-empty"));
    }
    w.push_str(CODAS.choose(rng).expect("non-empty"));
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn name_for(kind: Kind, rng: &mut StdRng) -> String {
    match kind {
        Kind::Person => format!("{} {}", word(rng, 2), word(rng, 3)),
        Kind::City => word(rng, 3),
        Kind::Country => format!("{}ia", word(rng, 2)),
        Kind::Organization => {
            let suffix = [
                "Works",
                "Institute",
                "Company",
                "Foundation",
                "Laboratories",
            ]
            .choose(rng)
            .expect("non-empty");
            format!("{} {suffix}", word(rng, 2))
        }
        Kind::Work => {
            let adj = [
                "Silent", "Golden", "Last", "Hidden", "Northern", "Broken", "Second",
            ]
            .choose(rng)
            .expect("non-empty");
            format!("The {adj} {}", word(rng, 2))
        }
    }
}

fn descriptor(kind: Kind, rng: &mut StdRng) -> String {
    let options: &[&str] = match kind {
        Kind::Person => &[
            "painter",
            "physicist",
            "novelist",
            "architect",
            "composer",
            "engineer",
            "botanist",
        ],
        Kind::City => &[
            "port city",
            "mountain town",
            "river city",
            "university town",
        ],
        Kind::Country => &["country", "republic", "kingdom"],
        Kind::Organization => &["research institute", "manufacturer", "publisher", "bank"],
        Kind::Work => &["film", "novel", "symphony", "opera"],
    };
    options.choose(rng).expect("non-empty").to_string()
}

/// A unique name: regenerated until it is new (look-alikes alter an existing name).
fn unique(mut make: impl FnMut() -> String, taken: &mut BTreeSet<String>) -> String {
    loop {
        let n = make();
        if taken.insert(n.clone()) {
            return n;
        }
    }
}

impl World {
    /// Generates the world of `config` (the same config always gives the same world).
    pub fn generate(config: &WorldConfig) -> crate::Result<World> {
        if config.people < 2 || config.cities < 1 || config.countries < 1 {
            return Err(EnvError::Qa(
                "world: needs at least 2 people, 1 city and 1 country".into(),
            ));
        }
        if config.organizations < 1 || config.works < 1 {
            return Err(EnvError::Qa(
                "world: needs at least 1 organization and 1 work".into(),
            ));
        }
        let mut rng = StdRng::seed_from_u64(config.seed);
        let mut taken = BTreeSet::new();
        let mut entities: Vec<Entity> = Vec::new();
        let mut ids: BTreeMap<Kind, Vec<usize>> = BTreeMap::new();
        for (kind, n) in [
            (Kind::Country, config.countries),
            (Kind::City, config.cities),
            (Kind::Person, config.people),
            (Kind::Organization, config.organizations),
            (Kind::Work, config.works),
        ] {
            for _ in 0..n {
                let name = unique(|| name_for(kind, &mut rng), &mut taken);
                ids.entry(kind).or_default().push(entities.len());
                entities.push(Entity {
                    name,
                    kind,
                    descriptor: descriptor(kind, &mut rng),
                    facts: BTreeMap::new(),
                    lookalike: false,
                });
            }
        }
        let pick = |kind: Kind, rng: &mut StdRng| *ids[&kind].choose(rng).expect("non-empty");
        // Facts. Every country gets a city of its own as capital when it has one.
        for &c in &ids[&Kind::City] {
            let country = pick(Kind::Country, &mut rng);
            entities[c]
                .facts
                .insert(Relation::Country, Value::Entity(country));
        }
        for &k in &ids[&Kind::Country] {
            let own: Vec<usize> = ids[&Kind::City]
                .iter()
                .copied()
                .filter(|&c| entities[c].facts[&Relation::Country] == Value::Entity(k))
                .collect();
            if let Some(&cap) = own.choose(&mut rng) {
                entities[k]
                    .facts
                    .insert(Relation::Capital, Value::Entity(cap));
            }
        }
        let people = ids[&Kind::Person].clone();
        for &p in &people {
            let city = pick(Kind::City, &mut rng);
            let org = pick(Kind::Organization, &mut rng);
            let f = &mut entities[p].facts;
            f.insert(Relation::BornIn, Value::Entity(city));
            f.insert(
                Relation::BirthYear,
                Value::Year(rng.random_range(1850..=1990)),
            );
            f.insert(Relation::Employer, Value::Entity(org));
            if rng.random_bool(0.7) {
                let mentor = loop {
                    let m = pick(Kind::Person, &mut rng);
                    if m != p {
                        break m;
                    }
                };
                entities[p]
                    .facts
                    .insert(Relation::Mentor, Value::Entity(mentor));
            }
        }
        for &o in &ids[&Kind::Organization] {
            let (city, founder) = (pick(Kind::City, &mut rng), pick(Kind::Person, &mut rng));
            entities[o]
                .facts
                .insert(Relation::Headquarters, Value::Entity(city));
            entities[o]
                .facts
                .insert(Relation::Founder, Value::Entity(founder));
        }
        for &w in &ids[&Kind::Work] {
            let creator = pick(Kind::Person, &mut rng);
            entities[w]
                .facts
                .insert(Relation::Creator, Value::Entity(creator));
            entities[w].facts.insert(
                Relation::ReleaseYear,
                Value::Year(rng.random_range(1900..=2020)),
            );
        }
        // Look-alikes: a near-identical name with facts drawn afresh.
        let real = entities.len();
        for e in 0..real {
            if !rng.random_bool(config.lookalike_share.clamp(0.0, 1.0)) {
                continue;
            }
            let base = entities[e].clone();
            let name = unique(
                || {
                    let twist = ["New ", "Old ", "", ""]
                        .choose(&mut rng)
                        .expect("non-empty");
                    let tail = ["s", "o", "a", " II"].choose(&mut rng).expect("non-empty");
                    format!("{twist}{}{tail}", base.name)
                },
                &mut taken,
            );
            let mut facts = BTreeMap::new();
            for (r, v) in &base.facts {
                let v = match v {
                    Value::Entity(x) => Value::Entity(pick(entities[*x].kind, &mut rng)),
                    Value::Year(y) => Value::Year(y + rng.random_range(1..=9)),
                };
                facts.insert(*r, v);
            }
            entities.push(Entity {
                name,
                facts,
                lookalike: true,
                ..base
            });
        }
        let documents = documents(&entities, config.mentions_per_entity, &mut rng);
        let questions = questions(&entities, config, &mut rng)?;
        Ok(World {
            config: config.clone(),
            entities,
            documents,
            questions,
        })
    }
}

fn value_text(entities: &[Entity], v: &Value) -> String {
    match v {
        Value::Entity(e) => entities[*e].name.clone(),
        Value::Year(y) => y.to_string(),
    }
}

/// The sentence stating one fact of `e`.
fn fact_sentence(entities: &[Entity], e: &Entity, r: Relation, v: &Value) -> String {
    let (n, o) = (&e.name, value_text(entities, v));
    match r {
        Relation::BornIn => format!("{n} was born in {o}."),
        Relation::BirthYear => format!("{n} was born in the year {o}."),
        Relation::Employer => format!("{n} works for {o}."),
        Relation::Mentor => format!("{n} was trained by the mentor {o}."),
        Relation::Country => format!("{n} is located in the country of {o}."),
        Relation::Capital => format!("The capital of {n} is {o}."),
        Relation::Headquarters => format!("{n} is headquartered in {o}."),
        Relation::Founder => format!("{n} was founded by {o}."),
        Relation::Creator => format!("{n} was created by {o}."),
        Relation::ReleaseYear => format!("{n} was released in {o}."),
    }
}

/// One article per entity, then passing mentions (another entity's name in a sentence that
/// states none of its facts), in a shuffled order.
fn documents(entities: &[Entity], mentions: usize, rng: &mut StdRng) -> Vec<Document> {
    let mut docs = Vec::new();
    for e in entities {
        let mut text = format!("{} is a {}.", e.name, e.descriptor);
        for (r, v) in &e.facts {
            text.push(' ');
            text.push_str(&fact_sentence(entities, e, *r, v));
        }
        docs.push((e.name.clone(), text));
    }
    for (k, e) in entities.iter().enumerate() {
        for m in 0..mentions {
            let other =
                &entities[(k + 1 + rng.random_range(0..entities.len() - 1)) % entities.len()];
            let year = rng.random_range(1900..=2020);
            let text = format!(
                "In {year}, a survey of notable examples ({}) listed {} next to {}. The survey \
                 was later revised.",
                e.descriptor, e.name, other.name
            );
            let title = format!(
                "Survey of notable examples ({}, {year}, entry {}-{})",
                e.descriptor,
                k + 1,
                m + 1
            );
            docs.push((title, text));
        }
    }
    docs.shuffle(rng);
    docs.into_iter()
        .enumerate()
        .map(|(i, (title, text))| Document {
            id: i.to_string(),
            url: super::corpus::wiki_url(&title),
            title,
            text,
        })
        .collect()
}

fn questions(
    entities: &[Entity],
    config: &WorldConfig,
    rng: &mut StdRng,
) -> crate::Result<Vec<Question>> {
    let starts: Vec<usize> = (0..entities.len())
        .filter(|&e| !entities[e].lookalike)
        .collect();
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (h, &want) in config.questions_per_hop.iter().enumerate() {
        let hops = h + 1;
        let mut made = 0;
        let mut tries = 0;
        while made < want {
            tries += 1;
            if tries > want * 200 + 1000 {
                return Err(EnvError::Qa(format!(
                    "world: could only make {made} of {want} {hops}-hop questions; enlarge the world"
                )));
            }
            let start = *starts.choose(rng).expect("non-empty");
            let mut at = start;
            let mut visited = vec![start];
            let mut rels = Vec::new();
            let mut support = Vec::new();
            let mut answer = None;
            for hop in 0..hops {
                let last = hop + 1 == hops;
                let options: Vec<(Relation, Value)> = entities[at]
                    .facts
                    .iter()
                    .filter(|(_, v)| match v {
                        Value::Entity(x) => !visited.contains(x),
                        Value::Year(_) => last,
                    })
                    .map(|(r, v)| (*r, *v))
                    .collect();
                let Some(&(r, v)) = options.choose(rng) else {
                    break;
                };
                rels.push(r);
                support.push(entities[at].name.clone());
                match v {
                    Value::Entity(x) => {
                        visited.push(x);
                        at = x;
                        if last {
                            answer = Some(entities[x].name.clone());
                        }
                    }
                    Value::Year(y) => answer = Some(y.to_string()),
                }
            }
            let Some(answer) = answer.filter(|_| rels.len() == hops) else {
                continue;
            };
            if !seen.insert((start, rels.clone())) {
                continue;
            }
            let mut np = entities[start].name.clone();
            for r in &rels[..hops - 1] {
                np = r.phrase().replace("{x}", &np);
            }
            let question = rels[hops - 1].question().replace("{x}", &np);
            let split = if rng.random_bool(config.test_share.clamp(0.0, 1.0)) {
                "test"
            } else {
                "train"
            };
            out.push(Question {
                id: format!("synth-{hops}hop-{made}"),
                question,
                answer: vec![answer],
                hops,
                split: split.into(),
                relations: rels,
                support,
            });
            made += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> WorldConfig {
        WorldConfig {
            seed: 7,
            people: 30,
            cities: 10,
            countries: 4,
            organizations: 8,
            works: 10,
            questions_per_hop: [20, 20, 10, 10],
            ..WorldConfig::default()
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_world_and_another_seed_another() {
        let a = World::generate(&small()).unwrap();
        assert_eq!(a, World::generate(&small()).unwrap());
        let b = World::generate(&WorldConfig { seed: 8, ..small() }).unwrap();
        assert_ne!(a.questions, b.questions);
    }

    #[test]
    fn every_hop_is_stated_in_its_support_document_and_answers_follow_the_chain() {
        let w = World::generate(&small()).unwrap();
        assert_eq!(w.questions.len(), 60);
        let by_title: BTreeMap<&str, &Document> =
            w.documents.iter().map(|d| (d.title.as_str(), d)).collect();
        let by_name: BTreeMap<&str, usize> = w
            .entities
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.as_str(), i))
            .collect();
        for q in &w.questions {
            assert_eq!(q.relations.len(), q.hops);
            // Walk the chain from the start entity through the facts.
            let mut at = by_name[q.support[0].as_str()];
            assert!(!w.entities[at].lookalike);
            for (k, r) in q.relations.iter().enumerate() {
                assert_eq!(w.entities[at].name, q.support[k]);
                let doc = by_title[q.support[k].as_str()];
                let v = w.entities[at].facts[r];
                let stated = fact_sentence(&w.entities, &w.entities[at], *r, &v);
                assert!(doc.text.contains(&stated), "{} lacks {stated}", doc.title);
                match v {
                    Value::Entity(x) => at = x,
                    Value::Year(y) => assert_eq!(q.answer, [y.to_string()]),
                }
            }
            if let Value::Entity(_) =
                w.entities[by_name[q.support[q.hops - 1].as_str()]].facts[&q.relations[q.hops - 1]]
            {
                assert_eq!(q.answer, [w.entities[at].name.clone()]);
            }
            assert!(q.question.ends_with('?'));
            assert!(q.split == "train" || q.split == "test");
        }
        let test = w.questions.iter().filter(|q| q.split == "test").count();
        assert!(test > 0 && test < w.questions.len());
        // Distractors exist: look-alike entities and passing mentions.
        assert!(w.entities.iter().any(|e| e.lookalike));
        assert!(w.documents.iter().any(|d| d.title.starts_with("Survey of")));
        // Titles are unique (a URL names one page).
        let titles: BTreeSet<&str> = w.documents.iter().map(|d| d.title.as_str()).collect();
        assert_eq!(titles.len(), w.documents.len());
    }

    #[test]
    fn a_world_too_small_for_its_questions_says_so() {
        let cfg = WorldConfig {
            people: 2,
            cities: 1,
            countries: 1,
            organizations: 1,
            works: 1,
            lookalike_share: 0.0,
            questions_per_hop: [0, 0, 0, 500],
            ..WorldConfig::default()
        };
        let err = World::generate(&cfg).unwrap_err().to_string();
        assert!(err.contains("4-hop"), "{err}");
    }
}
