//! Element types of vector values.
//!
//! What: the ten fixed-width number types a value can be an array of, with their stable one-byte
//! wire code, width and name. Every element is stored little-endian.
//!
//! ```text
//!   value = [e0][e1][e2]...     each e is width() bytes, little-endian
//!   code:   0=u8 1=u16 2=u32 3=u64 4=i8 5=i16 6=i32 7=i64 8=f32 9=f64
//! ```
//!
//! Goals: one source of truth for codes, widths and names, shared by the engine and the protocols.
//! Non-goals: arithmetic on elements (see `kernel.rs`), variable-width or composite elements.

use crate::error::OpError;

/// The type of each element of a value. The discriminant is the wire code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ElemType {
    U8 = 0,
    U16 = 1,
    U32 = 2,
    U64 = 3,
    I8 = 4,
    I16 = 5,
    I32 = 6,
    I64 = 7,
    F32 = 8,
    F64 = 9,
}

/// The widest element, in bytes. Scratch buffers sized by this hold any one element.
pub const ELEM_WIDTH_MAX: usize = 8;

impl ElemType {
    /// Every element type, in code order.
    pub const ALL: [ElemType; 10] = [
        ElemType::U8,
        ElemType::U16,
        ElemType::U32,
        ElemType::U64,
        ElemType::I8,
        ElemType::I16,
        ElemType::I32,
        ElemType::I64,
        ElemType::F32,
        ElemType::F64,
    ];

    /// Width of one element in bytes.
    pub const fn width(self) -> usize {
        match self {
            ElemType::U8 | ElemType::I8 => 1,
            ElemType::U16 | ElemType::I16 => 2,
            ElemType::U32 | ElemType::I32 | ElemType::F32 => 4,
            ElemType::U64 | ElemType::I64 | ElemType::F64 => 8,
        }
    }

    /// True for `f32` and `f64`, which follow IEEE 754 rather than wrapping integer arithmetic.
    pub const fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F64)
    }

    /// True for the signed and unsigned integer types of `width` bytes (one comparison when
    /// `width` is a constant: the codes of an integer width differ in bit 2 only).
    #[inline(always)]
    pub const fn is_int_of_width(self, width: usize) -> bool {
        let c = self as u8 & !4;
        c < 4 && (1usize << c) == width
    }

    /// The element type with wire code `code`.
    pub fn from_code(code: u8) -> Result<ElemType, OpError> {
        ElemType::ALL
            .get(usize::from(code))
            .copied()
            .ok_or(OpError::UnknownElemType(code))
    }

    /// The stable wire code of this element type.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Lower-case name as written in commands and documents: "u8" ... "f64".
    pub fn name(self) -> &'static str {
        match self {
            ElemType::U8 => "u8",
            ElemType::U16 => "u16",
            ElemType::U32 => "u32",
            ElemType::U64 => "u64",
            ElemType::I8 => "i8",
            ElemType::I16 => "i16",
            ElemType::I32 => "i32",
            ElemType::I64 => "i64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
        }
    }

    /// The element type named `name` (ASCII case-insensitive), the inverse of `name`.
    pub fn parse(name: &str) -> Option<ElemType> {
        ElemType::ALL
            .into_iter()
            .find(|elem| elem.name().eq_ignore_ascii_case(name))
    }
}

// The table in `ALL` must be in code order for `from_code` to be a plain index.
const _: () = {
    let mut i = 0;
    while i < ElemType::ALL.len() {
        assert!(ElemType::ALL[i] as usize == i);
        assert!(ElemType::ALL[i].width() <= ELEM_WIDTH_MAX);
        i += 1;
    }
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (i, elem) in ElemType::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(elem.code()), i);
            assert_eq!(ElemType::from_code(elem.code()), Ok(elem));
        }
        assert_eq!(ElemType::from_code(10), Err(OpError::UnknownElemType(10)));
        assert_eq!(ElemType::from_code(255), Err(OpError::UnknownElemType(255)));
    }

    #[test]
    fn widths_match_rust_types() {
        let expected = [1, 2, 4, 8, 1, 2, 4, 8, 4, 8];
        for (elem, width) in ElemType::ALL.into_iter().zip(expected) {
            assert_eq!(elem.width(), width, "{}", elem.name());
        }
        assert_eq!(ElemType::F32.width(), size_of::<f32>());
        assert_eq!(ElemType::I64.width(), size_of::<i64>());
    }

    #[test]
    fn names_round_trip() {
        for elem in ElemType::ALL {
            assert_eq!(ElemType::parse(elem.name()), Some(elem));
            assert_eq!(ElemType::parse(&elem.name().to_uppercase()), Some(elem));
        }
        assert_eq!(ElemType::U16.name(), "u16");
        assert_eq!(ElemType::F64.name(), "f64");
        assert_eq!(ElemType::parse("u128"), None);
        assert_eq!(ElemType::parse(""), None);
    }

    #[test]
    fn integer_of_width_is_exactly_the_two_integer_types_of_that_width() {
        for width in 0..=16 {
            for elem in ElemType::ALL {
                assert_eq!(
                    elem.is_int_of_width(width),
                    !elem.is_float() && elem.width() == width,
                    "{} width {width}",
                    elem.name()
                );
            }
        }
    }

    #[test]
    fn only_f32_and_f64_are_float() {
        let floats: Vec<_> = ElemType::ALL.into_iter().filter(|e| e.is_float()).collect();
        assert_eq!(floats, [ElemType::F32, ElemType::F64]);
    }
}
