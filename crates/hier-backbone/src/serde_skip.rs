//! Serde's `skip_serializing_if` for settings at their default.
//!
//! A setting added to a config after runs were keyed on its serialisation is left out while it
//! holds its default, so configs that do not set it keep the bytes (and the stage keys) they had
//! before it existed.

/// Whether `x` is its type's default (`0`, `0.0`, `false`, `None`, an empty string …).
pub fn is_default<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}
