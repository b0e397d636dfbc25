//! Peer JSON decoded with bounded memory, straight into typed values.
//!
//! A frame's length is capped before it is buffered, but the frame's *decoded* size is what a
//! peer controls next: `["","",…]` is 3 bytes of JSON per element and 24 bytes of `String`
//! each, and a tree of empty objects costs more still. [`from_slice`] wraps serde_json's
//! deserializer so that everything decoded below it is bounded by one [`Bounds`]:
//!
//! - every string is at most `max_string` bytes, refused before it is copied;
//! - every list and map holds at most `max_items` items, refused before the next one;
//! - the memory all lists, maps and strings of one document take is charged against
//!   `budget` as it is allocated (lists by their capacity, which doubles as they grow; maps by
//!   twice their entries, for the nodes and tables around them; strings by their length), and
//!   decoding stops with an error at the first allocation over it.
//!
//! Struct fields, unknown fields (skipped without allocating) and numbers are not charged:
//! their memory is a fixed part of the value that holds them. An error names the path of the
//! value that broke a bound or failed to decode (`results.streams[3].intervals`).
//!
//! Parsing stays linear in the input: serde_json reads each byte once, and the checks here are
//! constant work per value. Nothing here panics on any input.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};

/// What one decoded document may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes that all lists, maps and strings of the document may take together.
    pub budget: usize,
    /// Items in any one list or map.
    pub max_items: usize,
    /// Bytes in any one string.
    pub max_string: usize,
}

/// Why a document was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON, or truncated.
    Syntax(String),
    /// JSON, but not the expected shape (a missing field, a wrong type).
    Shape(String),
    /// It broke one of the [`Bounds`].
    Limit(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(m) | Self::Shape(m) | Self::Limit(m) => f.write_str(m),
        }
    }
}

/// Decodes `bytes` as one `T` within `bounds`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8], bounds: Bounds) -> Result<T, DecodeError> {
    let st = State::new(bounds);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = T::deserialize(Wrap { de: &mut de, st: &st, kind: Kind::Value })
        .and_then(|v| de.end().map(|()| v));
    out.map_err(|e| {
        let at = st.error_path.take().filter(|p| !p.is_empty());
        let here = |m: String| match &at {
            Some(p) => format!("{p}: {m}"),
            None => m,
        };
        if let Some(v) = st.violation.take() {
            return DecodeError::Limit(here(v));
        }
        match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                DecodeError::Syntax(e.to_string())
            }
            _ => DecodeError::Shape(here(e.to_string())),
        }
    })
}

/// One step of the path to a value.
enum Seg {
    Key(String),
    Index(usize),
}

/// Longest key kept for error paths.
const KEY_SHOWN: usize = 40;

struct State {
    bounds: Bounds,
    left: Cell<usize>,
    path: RefCell<Vec<Seg>>,
    /// The path where the first error arose.
    error_path: RefCell<Option<String>>,
    /// The first bound broken, in words.
    violation: RefCell<Option<String>>,
    /// The last string or key seen (a map's key, just before its value), truncated.
    last_key: RefCell<String>,
}

impl State {
    fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            left: Cell::new(bounds.budget),
            path: RefCell::new(Vec::new()),
            error_path: RefCell::new(None),
            violation: RefCell::new(None),
            last_key: RefCell::new(String::new()),
        }
    }

    fn path_text(&self) -> String {
        let mut out = String::new();
        for seg in self.path.borrow().iter() {
            match seg {
                Seg::Key(k) if out.is_empty() => out.push_str(k),
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// Records the first error's path (called on the way out of each level).
    fn note_error(&self) {
        let mut at = self.error_path.borrow_mut();
        if at.is_none() {
            *at = Some(self.path_text());
        }
    }

    /// A broken bound: remembered (first one wins) and returned as the decoder's error.
    fn violate<E: de::Error>(&self, what: String) -> E {
        let mut v = self.violation.borrow_mut();
        if v.is_none() {
            *v = Some(what.clone());
            drop(v);
            self.note_error();
        }
        E::custom(what)
    }

    fn charge<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(self.violate(format!(
                "decoding would take more than {} bytes of memory (the limit for this message)",
                self.bounds.budget
            ))),
        }
    }

    fn string<E: de::Error>(&self, len: usize, kind: Kind) -> Result<(), E> {
        if kind == Kind::Key {
            return Ok(());
        }
        if len > self.bounds.max_string {
            return Err(self.violate(format!(
                "a string of {len} bytes; at most {} are accepted",
                self.bounds.max_string
            )));
        }
        self.charge(len)
    }

    fn remember_key(&self, s: &str) {
        let mut k = self.last_key.borrow_mut();
        k.clear();
        let mut end = s.len().min(KEY_SHOWN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        k.push_str(&s[..end]);
    }

    fn count<E: de::Error>(&self, n: usize) -> Result<(), E> {
        if n > self.bounds.max_items {
            return Err(self
                .violate(format!("more than {} items in one list or map", self.bounds.max_items)));
        }
        Ok(())
    }

    /// Runs `f` one level down the path.
    fn enter<T, E>(&self, seg: Seg, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        self.path.borrow_mut().push(seg);
        let out = f();
        if out.is_err() {
            self.note_error();
        }
        self.path.borrow_mut().pop();
        out
    }
}

/// How a value's strings and maps are charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A value: strings and maps are allocations.
    Value,
    /// A struct: its map of fields costs nothing beyond the struct.
    Struct,
    /// A field or variant name: not kept, only remembered for the path.
    Key,
}

/// The deserializer wrapper.
struct Wrap<'s, D> {
    de: D,
    st: &'s State,
    kind: Kind,
}

impl<'s, D> Wrap<'s, D> {
    fn visitor<V>(&self, v: V, kind: Kind) -> WrapVisitor<'s, V> {
        WrapVisitor { v, st: self.st, kind }
    }
}

macro_rules! forward_wrapped {
    ($($method:ident($($arg:ident: $ty:ty),*) as $kind:expr;)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* v: V) -> Result<V::Value, D::Error> {
            // None: the kind this value already has.
            let kind: Option<Kind> = $kind;
            let w = self.visitor(v, kind.unwrap_or(self.kind));
            self.de.$method($($arg,)* w)
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Wrap<'_, D> {
    type Error = D::Error;

    forward_wrapped! {
        deserialize_any() as None;
        deserialize_bool() as None;
        deserialize_i8() as None;
        deserialize_i16() as None;
        deserialize_i32() as None;
        deserialize_i64() as None;
        deserialize_i128() as None;
        deserialize_u8() as None;
        deserialize_u16() as None;
        deserialize_u32() as None;
        deserialize_u64() as None;
        deserialize_u128() as None;
        deserialize_f32() as None;
        deserialize_f64() as None;
        deserialize_char() as None;
        deserialize_str() as None;
        deserialize_string() as None;
        deserialize_bytes() as None;
        deserialize_byte_buf() as None;
        deserialize_option() as None;
        deserialize_unit() as None;
        deserialize_seq() as None;
        deserialize_map() as None;
        deserialize_unit_struct(name: &'static str) as Some(Kind::Value);
        deserialize_newtype_struct(name: &'static str) as Some(Kind::Value);
        deserialize_tuple(len: usize) as Some(Kind::Value);
        deserialize_tuple_struct(name: &'static str, len: usize) as Some(Kind::Value);
        // A struct's map of fields is not an allocation of its own.
        deserialize_struct(name: &'static str, fields: &'static [&'static str]) as Some(Kind::Struct);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]) as Some(Kind::Value);
        // Field and variant names are only remembered, for the path.
        deserialize_identifier() as Some(Kind::Key);
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        // Skipped values are read without being kept.
        self.de.deserialize_ignored_any(v)
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The visitor wrapper: checks strings, and wraps lists, maps and enums.
struct WrapVisitor<'s, V> {
    v: V,
    st: &'s State,
    kind: Kind,
}

impl<V> WrapVisitor<'_, V> {
    /// Checks and charges a string, and remembers it in case it is a map's key.
    fn text<E: de::Error>(&self, s: &str) -> Result<(), E> {
        self.st.string(s.len(), self.kind)?;
        self.st.remember_key(s);
        Ok(())
    }
}

macro_rules! forward_scalars {
    ($($method:ident: $ty:ty)*) => {$(
        fn $method<E: de::Error>(self, x: $ty) -> Result<V::Value, E> {
            self.v.$method(x)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for WrapVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.v.expecting(f)
    }

    forward_scalars! {
        visit_bool: bool visit_i8: i8 visit_i16: i16 visit_i32: i32 visit_i64: i64
        visit_i128: i128 visit_u8: u8 visit_u16: u16 visit_u32: u32 visit_u64: u64
        visit_u128: u128 visit_f32: f32 visit_f64: f64 visit_char: char
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        self.text(s)?;
        self.v.visit_str(s)
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<V::Value, E> {
        self.text(s)?;
        self.v.visit_borrowed_str(s)
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<V::Value, E> {
        self.text(&s)?;
        self.v.visit_string(s)
    }

    fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<V::Value, E> {
        self.st.string(b.len(), self.kind)?;
        self.v.visit_bytes(b)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, b: &'de [u8]) -> Result<V::Value, E> {
        self.st.string(b.len(), self.kind)?;
        self.v.visit_borrowed_bytes(b)
    }

    fn visit_byte_buf<E: de::Error>(self, b: Vec<u8>) -> Result<V::Value, E> {
        self.st.string(b.len(), self.kind)?;
        self.v.visit_byte_buf(b)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_some(Wrap { de: d, st: self.st, kind: Kind::Value })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.v.visit_newtype_struct(Wrap { de: d, st: self.st, kind: Kind::Value })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.v.visit_seq(WrapSeq { seq, st: self.st, n: 0, capacity: 0 })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let charged = self.kind != Kind::Struct;
        self.v.visit_map(WrapMap { map, st: self.st, n: 0, charged })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.v.visit_enum(WrapEnum { data, st: self.st })
    }
}

/// A seed whose deserializer is wrapped.
struct WrapSeed<'s, S> {
    seed: S,
    st: &'s State,
    kind: Kind,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for WrapSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Wrap { de: d, st: self.st, kind: self.kind })
    }
}

/// A list: counted, and charged by the capacity a `Vec` of its items would reach.
struct WrapSeq<'s, A> {
    seq: A,
    st: &'s State,
    n: usize,
    capacity: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for WrapSeq<'_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let index = self.n;
        let (st, size) = (self.st, std::mem::size_of::<T::Value>());
        let seed = WrapSeed { seed, st, kind: Kind::Value };
        let seq = &mut self.seq;
        let item = st.enter(Seg::Index(index), || seq.next_element_seed(seed))?;
        if item.is_some() {
            self.n += 1;
            st.count(self.n)?;
            if self.n > self.capacity && size > 0 {
                // Vec's growth: double, from at least 8 (1-byte items), 4 (up to 1 KiB) or 1.
                let least = if size == 1 {
                    8
                } else if size <= 1024 {
                    4
                } else {
                    1
                };
                let grown = (self.capacity * 2).max(least);
                st.charge(grown.saturating_sub(self.capacity).saturating_mul(size))?;
                self.capacity = grown;
            }
        }
        Ok(item)
    }

    fn size_hint(&self) -> Option<usize> {
        self.seq.size_hint()
    }
}

/// A map or a struct's fields. A map's entries are counted and charged at twice their size
/// plus 16 bytes (tree nodes, hash tables); a struct's fields are neither.
struct WrapMap<'s, A> {
    map: A,
    st: &'s State,
    n: usize,
    charged: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for WrapMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let st = self.st;
        let key = self.map.next_key_seed(WrapSeed { seed, st, kind: Kind::Value })?;
        if key.is_some() && self.charged {
            self.n += 1;
            st.count(self.n)?;
            st.charge(2 * std::mem::size_of::<K::Value>() + 16)?;
        }
        Ok(key)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let st = self.st;
        if self.charged {
            st.charge(2 * std::mem::size_of::<V::Value>())?;
        }
        let key = Seg::Key(st.last_key.borrow().clone());
        let map = &mut self.map;
        st.enter(key, || map.next_value_seed(WrapSeed { seed, st, kind: Kind::Value }))
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// An enum: its variant's content is wrapped.
struct WrapEnum<'s, A> {
    data: A,
    st: &'s State,
}

impl<'de, 's, A: EnumAccess<'de>> EnumAccess<'de> for WrapEnum<'s, A> {
    type Error = A::Error;
    type Variant = WrapVariant<'s, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), A::Error> {
        let st = self.st;
        let (value, variant) = self.data.variant_seed(WrapSeed { seed, st, kind: Kind::Key })?;
        Ok((value, WrapVariant { variant, st }))
    }
}

/// An enum variant's content, one level down the path (named after the variant).
struct WrapVariant<'s, A> {
    variant: A,
    st: &'s State,
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for WrapVariant<'_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.variant.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        let (st, variant) = (self.st, self.variant);
        let key = Seg::Key(st.last_key.borrow().clone());
        st.enter(key, || variant.newtype_variant_seed(WrapSeed { seed, st, kind: Kind::Value }))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        let (st, variant) = (self.st, self.variant);
        let key = Seg::Key(st.last_key.borrow().clone());
        st.enter(key, || variant.tuple_variant(len, WrapVisitor { v, st, kind: Kind::Value }))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        let (st, variant) = (self.st, self.variant);
        let key = Seg::Key(st.last_key.borrow().clone());
        st.enter(key, || variant.struct_variant(fields, WrapVisitor { v, st, kind: Kind::Struct }))
    }
}
