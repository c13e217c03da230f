//! The audit's prompts: canary documents and random filler.
//!
//! A canary document opens with `^` and repeats the tenant's canary
//! (`CANARY-<label>-<8 hex>`), so any span of it a model echoes or a
//! cluster leaks carries the whole marker. Filler for timing prompts is
//! seeded random words, so no two prefixes share a cached block.

use rand::Rng;

/// A tenant's canary.
pub fn canary(label: &str, rng: &mut impl Rng) -> String {
    format!("CANARY-{label}-{:08x}", rng.random::<u32>())
}

/// A document of exactly `chars` characters carrying `canary` throughout.
pub fn canary_document(canary: &str, chars: usize) -> String {
    let mut s = String::from("^");
    while s.len() < chars {
        s.push_str(canary);
        s.push(' ');
    }
    s.truncate(chars);
    s
}

const WORDS: &[&str] = &[
    "amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "jasper",
    "kelp", "lumen", "marble", "nectar", "onyx", "pewter", "quartz", "russet", "sienna", "tundra",
];

/// Seeded random words, exactly `chars` characters.
pub fn filler(chars: usize, rng: &mut impl Rng) -> String {
    let mut s = String::new();
    while s.len() < chars {
        s.push_str(WORDS[rng.random_range(0..WORDS.len())]);
        s.push(' ');
    }
    s.truncate(chars);
    s
}
