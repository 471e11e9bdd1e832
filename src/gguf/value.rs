//! Metadata values: the thirteen GGUF value types, arrays of them, and the
//! ordered key-value table with typed getters.

use core::fmt;
use std::collections::HashMap;

use super::error::GgufError;

/// The type tag of a metadata value, with its GGUF id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `uint8` (id 0).
    U8,
    /// `int8` (id 1).
    I8,
    /// `uint16` (id 2).
    U16,
    /// `int16` (id 3).
    I16,
    /// `uint32` (id 4).
    U32,
    /// `int32` (id 5).
    I32,
    /// `float32` (id 6).
    F32,
    /// `bool`, one byte holding 0 or 1 (id 7).
    Bool,
    /// UTF-8 string with a u64 length (id 8).
    String,
    /// Array of values of one type (id 9).
    Array,
    /// `uint64` (id 10).
    U64,
    /// `int64` (id 11).
    I64,
    /// `float64` (id 12).
    F64,
}

impl ValueType {
    /// The type with GGUF id `id`, or `None` if unknown.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// The GGUF id of the type.
    pub fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// Smallest number of bytes one value of this type takes in a file: a
    /// string is at least its 8-byte length, an array at least its 4-byte
    /// element type and 8-byte count. The parser checks every count against
    /// this before allocating.
    pub fn min_encoded_size(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }

    /// Lower-case name used in messages and `inferno inspect`.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `float32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// UTF-8 string.
    String(String),
    /// Array of one element type.
    Array(Array),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float64`.
    F64(f64),
}

impl Value {
    /// The value's type tag.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value as an integer if it holds one of the eight integer types
    /// (`u8`, `i8`, `u16`, `i16`, `u32`, `i32`, `u64`, `i64`), widened
    /// without loss; `None` for floats, bools, strings and arrays.
    ///
    /// Writers differ in the integer type they give a size or an id
    /// (llama.cpp writes `u32`, other tools `u64` or `i32`), so readers
    /// that accept any of them go through this one conversion.
    pub fn as_int(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            Value::F32(_) | Value::Bool(_) | Value::String(_) | Value::Array(_) | Value::F64(_) => {
                return None
            }
        })
    }
}

/// A metadata array. Each variant holds elements of one type, so an array
/// can never mix types; an array of arrays holds inner arrays that each have
/// their own element type, as the format allows.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// `uint8` elements.
    U8(Vec<u8>),
    /// `int8` elements.
    I8(Vec<i8>),
    /// `uint16` elements.
    U16(Vec<u16>),
    /// `int16` elements.
    I16(Vec<i16>),
    /// `uint32` elements.
    U32(Vec<u32>),
    /// `int32` elements.
    I32(Vec<i32>),
    /// `float32` elements.
    F32(Vec<f32>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    String(Vec<String>),
    /// Nested arrays.
    Array(Vec<Array>),
    /// `uint64` elements.
    U64(Vec<u64>),
    /// `int64` elements.
    I64(Vec<i64>),
    /// `float64` elements.
    F64(Vec<f64>),
}

impl Array {
    /// The element type.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Depth of array nesting: 1 for an array of scalars or strings, one more
    /// per level of arrays inside.
    pub fn depth(&self) -> usize {
        match self {
            Array::Array(inner) => 1 + inner.iter().map(Array::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

/// The ordered metadata table of a GGUF file: keys in file order, each
/// unique, with an index for lookups.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, Value)>,
    index: HashMap<String, usize>,
}

macro_rules! scalar_getters {
    ($( $(#[$doc:meta])* $fn:ident -> $ty:ty, $variant:ident; )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Errors
            ///
            /// [`GgufError::KeyNotFound`] if the key is absent,
            /// [`GgufError::TypeMismatch`] (naming the key, the expected and
            /// the found type) if it holds another type.
            pub fn $fn(&self, key: &str) -> Result<$ty, GgufError> {
                match self.require(key)? {
                    Value::$variant(v) => Ok(*v),
                    other => Err(mismatch(key, ValueType::$variant, other.value_type())),
                }
            }
        )*
    };
}

macro_rules! array_getters {
    ($( $(#[$doc:meta])* $fn:ident -> $ty:ty, $variant:ident; )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Errors
            ///
            /// [`GgufError::KeyNotFound`] if the key is absent,
            /// [`GgufError::TypeMismatch`] if it is not an array, and
            /// [`GgufError::ArrayTypeMismatch`] if its elements have another
            /// type.
            pub fn $fn(&self, key: &str) -> Result<&[$ty], GgufError> {
                match self.get_array(key)? {
                    Array::$variant(v) => Ok(v),
                    other => Err(GgufError::ArrayTypeMismatch {
                        key: key.to_owned(),
                        expected: ValueType::$variant,
                        found: other.element_type(),
                    }),
                }
            }
        )*
    };
}

fn mismatch(key: &str, expected: ValueType, found: ValueType) -> GgufError {
    GgufError::TypeMismatch {
        key: key.to_owned(),
        expected,
        found,
    }
}

impl Metadata {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `key`, returning the value back if the key is already present
    /// (GGUF keys are unique; the caller decides which error that is).
    pub(crate) fn insert(&mut self, key: String, value: Value) -> Result<(), Value> {
        if self.index.contains_key(&key) {
            return Err(value);
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the table has no keys.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every key and value, in file order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Value)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// The value of `key`.
    ///
    /// # Errors
    ///
    /// [`GgufError::KeyNotFound`] if the key is absent.
    pub fn require(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::KeyNotFound {
            key: key.to_owned(),
        })
    }

    scalar_getters! {
        /// The `u8` value of `key`.
        get_u8 -> u8, U8;
        /// The `i8` value of `key`.
        get_i8 -> i8, I8;
        /// The `u16` value of `key`.
        get_u16 -> u16, U16;
        /// The `i16` value of `key`.
        get_i16 -> i16, I16;
        /// The `u32` value of `key`, e.g. `qwen3.block_count`.
        get_u32 -> u32, U32;
        /// The `i32` value of `key`.
        get_i32 -> i32, I32;
        /// The `f32` value of `key`, e.g. `qwen3.rope.freq_base`.
        get_f32 -> f32, F32;
        /// The `bool` value of `key`.
        get_bool -> bool, Bool;
        /// The `u64` value of `key`.
        get_u64 -> u64, U64;
        /// The `i64` value of `key`.
        get_i64 -> i64, I64;
        /// The `f64` value of `key`.
        get_f64 -> f64, F64;
    }

    /// The value of `key` as an integer, whichever of the eight integer
    /// types it has (see [`Value::as_int`]).
    ///
    /// # Errors
    ///
    /// [`GgufError::KeyNotFound`] if the key is absent,
    /// [`GgufError::NotAnInteger`] (naming the key and the type found) if
    /// it holds a float, bool, string or array.
    pub fn get_int(&self, key: &str) -> Result<i128, GgufError> {
        let value = self.require(key)?;
        value.as_int().ok_or_else(|| GgufError::NotAnInteger {
            key: key.to_owned(),
            found: value.value_type(),
        })
    }

    /// The string value of `key`, e.g. `general.architecture`.
    ///
    /// # Errors
    ///
    /// [`GgufError::KeyNotFound`] if the key is absent,
    /// [`GgufError::TypeMismatch`] if it is not a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            Value::String(s) => Ok(s),
            other => Err(mismatch(key, ValueType::String, other.value_type())),
        }
    }

    /// The array value of `key`, of any element type.
    ///
    /// # Errors
    ///
    /// [`GgufError::KeyNotFound`] if the key is absent,
    /// [`GgufError::TypeMismatch`] if it is not an array.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        match self.require(key)? {
            Value::Array(a) => Ok(a),
            other => Err(mismatch(key, ValueType::Array, other.value_type())),
        }
    }

    array_getters! {
        /// The string array of `key`, e.g. `tokenizer.ggml.tokens`.
        get_str_array -> String, String;
        /// The `u32` array of `key`.
        get_u32_array -> u32, U32;
        /// The `i32` array of `key`, e.g. `tokenizer.ggml.token_type`.
        get_i32_array -> i32, I32;
        /// The `f32` array of `key`, e.g. `tokenizer.ggml.scores`.
        get_f32_array -> f32, F32;
        /// The `u64` array of `key`.
        get_u64_array -> u64, U64;
        /// The `i64` array of `key`.
        get_i64_array -> i64, I64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Metadata {
        let mut m = Metadata::new();
        m.insert("a.count".into(), Value::U32(7)).unwrap();
        m.insert("a.name".into(), Value::String("x".into()))
            .unwrap();
        m.insert("a.list".into(), Value::Array(Array::I32(vec![1, -2])))
            .unwrap();
        m
    }

    #[test]
    fn getters_return_typed_values() {
        let m = table();
        assert_eq!(m.get_u32("a.count").unwrap(), 7);
        assert_eq!(m.get_str("a.name").unwrap(), "x");
        assert_eq!(m.get_i32_array("a.list").unwrap(), &[1, -2]);
        assert_eq!(m.len(), 3);
        let keys: Vec<&str> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["a.count", "a.name", "a.list"]);
    }

    #[test]
    fn type_mismatch_names_key_and_both_types() {
        let err = table().get_f32("a.count").unwrap_err();
        assert!(matches!(
            &err,
            GgufError::TypeMismatch { key, expected: ValueType::F32, found: ValueType::U32 }
                if key == "a.count"
        ));
        let msg = err.to_string();
        assert!(
            msg.contains("a.count") && msg.contains("f32") && msg.contains("u32"),
            "{msg}"
        );
        let err = table().get_str_array("a.list").unwrap_err();
        assert!(matches!(
            err,
            GgufError::ArrayTypeMismatch {
                expected: ValueType::String,
                found: ValueType::I32,
                ..
            }
        ));
    }

    #[test]
    fn missing_key_and_duplicate_insert() {
        let mut m = table();
        assert!(matches!(m.get_u32("nope"), Err(GgufError::KeyNotFound { key }) if key == "nope"));
        assert_eq!(m.insert("a.count".into(), Value::U8(1)), Err(Value::U8(1)));
        assert_eq!(m.get_u32("a.count").unwrap(), 7);
    }

    #[test]
    fn as_int_widens_every_integer_type_and_nothing_else() {
        let ints = [
            (Value::U8(u8::MAX), i128::from(u8::MAX)),
            (Value::I8(i8::MIN), i128::from(i8::MIN)),
            (Value::U16(u16::MAX), i128::from(u16::MAX)),
            (Value::I16(i16::MIN), i128::from(i16::MIN)),
            (Value::U32(u32::MAX), i128::from(u32::MAX)),
            (Value::I32(-7), -7),
            (Value::U64(u64::MAX), i128::from(u64::MAX)),
            (Value::I64(i64::MIN), i128::from(i64::MIN)),
        ];
        for (value, n) in ints {
            assert_eq!(value.as_int(), Some(n), "{value:?}");
        }
        for value in [
            Value::F32(1.0),
            Value::F64(2.0),
            Value::Bool(true),
            Value::String("3".into()),
            Value::Array(Array::U32(vec![4])),
        ] {
            assert_eq!(value.as_int(), None, "{value:?}");
        }
    }

    #[test]
    fn get_int_accepts_any_integer_type_and_names_a_non_integer() {
        let mut m = table();
        m.insert("a.neg".into(), Value::I8(-3)).unwrap();
        assert_eq!(m.get_int("a.count").unwrap(), 7);
        assert_eq!(m.get_int("a.neg").unwrap(), -3);
        assert!(matches!(m.get_int("nope"), Err(GgufError::KeyNotFound { key }) if key == "nope"));
        let err = m.get_int("a.name").unwrap_err();
        assert!(matches!(
            &err,
            GgufError::NotAnInteger { key, found: ValueType::String } if key == "a.name"
        ));
        let msg = err.to_string();
        assert!(
            msg.contains("a.name") && msg.contains("string") && msg.contains("integer"),
            "{msg}"
        );
    }

    #[test]
    fn type_ids_round_trip() {
        for id in 0..13 {
            assert_eq!(ValueType::from_id(id).unwrap().id(), id);
        }
        assert_eq!(ValueType::from_id(13), None);
    }

    #[test]
    fn depth_counts_nesting() {
        let a = Array::Array(vec![
            Array::U8(vec![]),
            Array::Array(vec![Array::Bool(vec![])]),
        ]);
        assert_eq!(a.depth(), 3);
        assert_eq!(Array::String(vec![]).depth(), 1);
    }
}
