//! Just enough of Thrift's compact protocol, read as parquet 60 reads it, to
//! check what parquet sizes allocations by before it decodes: the schema's
//! child counts (`FileMetaData` field 2, a list of `SchemaElement`s whose
//! field 5 is `num_children`) and page headers.

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn skip(&mut self, n: u64) -> Option<()> {
        let n = usize::try_from(n).ok()?;
        self.at = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())?;
        Some(())
    }

    /// A ULEB128 varint as parquet 60 reads one: of any length, each
    /// byte's bits shifted by `7 * i` modulo 64 (`wrapping_shl`), so a
    /// long varint wraps around instead of failing (found by the
    /// `parquet_reader` fuzz target: a 14-byte `num_values`).
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            value |= u64::from(b & 0x7F).wrapping_shl(shift);
            if b & 0x80 == 0 {
                return Some(value);
            }
            shift = shift.wrapping_add(7);
        }
    }

    fn zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An `i32` field, truncated from its varint as parquet does (`as i32`).
    fn zigzag_i32(&mut self) -> Option<i64> {
        Some(i64::from(self.zigzag()? as i32))
    }

    /// A field header: `(type, id)`, type 0 for the end of the struct.
    /// As parquet 60 reads one: a low nibble of 0 ends the struct
    /// whatever the high one holds, and a type above 13 fails.
    fn field(&mut self, last: i16) -> Option<(u8, i16)> {
        let b = self.byte()?;
        if b & 0x0F == 0 {
            return Some((0, 0));
        }
        if b & 0x0F > 13 {
            return None;
        }
        let delta = i16::from(b >> 4);
        let id = if delta == 0 {
            // parquet truncates a field id read in full (`as i16`).
            self.zigzag()? as i16
        } else {
            last.checked_add(delta)?
        };
        Some((b & 0x0F, id))
    }

    /// A list or set header: `(element type, count)`.
    fn list(&mut self) -> Option<(u8, u64)> {
        let b = self.byte()?;
        let count = match b >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        Some((b & 0x0F, count))
    }
}

/// Why a walk of a page header stopped.
pub(super) enum Skim {
    /// The bytes end before the struct does, or do not parse.
    Unparsed,
    /// The struct holds what parquet must not be given (the message says what).
    Refused(String),
}

/// How parquet skims: Thrift's compact protocol as it is defined, except
/// that a boolean in a list, set or map takes no byte.
struct Strict<'a> {
    input: Input<'a>,
    refused: Option<String>,
}

impl Strict<'_> {
    /// Like `Input::skip_value`, refusing containers of booleans.
    fn value(&mut self, ty: u8, depth: usize) -> Option<()> {
        if depth == 0 {
            return None;
        }
        let input = &mut self.input;
        match ty {
            1 | 2 => Some(()),
            3 => input.skip(1),
            4..=6 => input.varint().map(|_| ()),
            7 => input.skip(8),
            8 => {
                let n = input.varint()?;
                input.skip(n)
            }
            9 | 10 => {
                let (element, count) = input.list()?;
                self.container(count, &[element])?;
                for _ in 0..count {
                    self.value(element, depth - 1)?;
                }
                Some(())
            }
            11 => {
                let count = input.varint()?;
                if count > 0 {
                    let types = input.byte()?;
                    self.container(count, &[types >> 4, types & 0x0F])?;
                    for _ in 0..count {
                        self.value(types >> 4, depth - 1)?;
                        self.value(types & 0x0F, depth - 1)?;
                    }
                }
                Some(())
            }
            12 => self.fields(depth - 1),
            13 => input.skip(16),
            _ => None,
        }
    }

    fn container(&mut self, count: u64, types: &[u8]) -> Option<()> {
        if count > 0 && types.iter().any(|t| matches!(t, 1 | 2)) {
            self.refused = Some(format!(
                "a Thrift list, set or map of {count} booleans (no field of a valid file is one; parquet would skip it without reading it)"
            ));
            return None;
        }
        Some(())
    }

    /// Skims a struct's fields as parquet skips them: each field header
    /// read as if it followed field 0 (a delta never overflows).
    fn fields(&mut self, depth: usize) -> Option<()> {
        loop {
            let (ty, _) = self.input.field(0)?;
            if ty == 0 {
                return Some(());
            }
            self.value(ty, depth)?;
        }
    }
}

/// What lodt needs of a Parquet `PageHeader`.
#[derive(Debug, Default)]
pub(super) struct PageHeader {
    /// Field 1, `type` (0 data page, 2 dictionary page, 3 data page v2).
    pub page_type: Option<i64>,
    /// Field 2, `uncompressed_page_size`.
    pub uncompressed_page_size: Option<i64>,
    /// Field 3, `compressed_page_size`.
    pub compressed_page_size: Option<i64>,
    /// Field 5, `data_page_header`, when present: its values'
    /// `encoding` (field 5.2), when present.
    pub data_page: Option<Option<i64>>,
    /// Field 8, `data_page_header_v2`, when present: its values'
    /// `encoding` (field 8.4), when present.
    pub data_page_v2: Option<Option<i64>>,
    /// A dictionary page's `num_values` (field 7.1).
    pub dictionary_values: Option<i64>,
}

/// Reads the `PageHeader` that starts `bytes` as parquet 60 does
/// (`PageHeader::read_thrift_without_stats`), and returns its length in
/// bytes and what lodt checks of it. Like parquet, it reads a field it
/// knows by its id, whatever type the encoding gives it: an integer field
/// is a varint even where the field header says it is a boolean (which
/// has no bytes). A field it does not know is skimmed as parquet skips it
/// (refusing a container of booleans).
pub(super) fn skim_page_header(bytes: &[u8]) -> Result<(usize, PageHeader), Skim> {
    let mut strict = Strict {
        input: Input { bytes, at: 0 },
        refused: None,
    };
    let mut header = PageHeader::default();
    let mut last = 0;
    let done = loop {
        let Some((ty, id)) = strict.input.field(last) else {
            break false;
        };
        let read = match id {
            _ if ty == 0 => break true,
            1 => strict
                .input
                .zigzag_i32()
                .map(|v| header.page_type = Some(v)),
            3 => strict
                .input
                .zigzag_i32()
                .map(|v| header.compressed_page_size = Some(v)),
            2 => strict
                .input
                .zigzag_i32()
                .map(|v| header.uncompressed_page_size = Some(v)),
            4 => strict.input.zigzag_i32().map(|_| ()),
            // DataPageHeader: num_values, encoding, two level encodings.
            5 => {
                let found = header.data_page.insert(None);
                strict.known_int(|f| (1..=4).contains(&f), |_| false, 2, found)
            }
            // IndexPageHeader: a struct, of no field parquet knows.
            6 => strict.record_with(|_| Known::Skip, |_, _| {}),
            // DictionaryPageHeader: num_values, encoding, is_sorted.
            7 => strict.known_int(
                |f| (1..=2).contains(&f),
                |f| f == 3,
                1,
                &mut header.dictionary_values,
            ),
            // DataPageHeaderV2: five counts and lengths, encoding, is_compressed.
            8 => {
                let found = header.data_page_v2.insert(None);
                strict.known_int(|f| (1..=6).contains(&f), |f| f == 7, 4, found)
            }
            _ => strict.value(ty, 64),
        };
        if read.is_none() {
            break false;
        }
        last = id;
    };
    if done {
        Ok((strict.input.at, header))
    } else {
        Err(strict.refused.map_or(Skim::Unparsed, Skim::Refused))
    }
}

/// A field of a struct parquet knows, as parquet reads it: by its id,
/// whatever type its field header gives.
#[derive(Clone, Copy)]
enum Known {
    /// An integer or enum: a varint.
    Int,
    /// A boolean: no bytes, and a field header of type 1 or 2 (parquet
    /// fails on another).
    Bool,
    /// An `i8`: one byte.
    Byte,
    /// A double: eight bytes.
    Double,
    /// A string: a varint length, then that many bytes of UTF-8.
    Str,
    /// Binary: a varint length, then that many bytes.
    Bin,
    /// A struct with no fields: one zero byte.
    Empty,
    /// A list whose header must give element type `.0` (parquet's
    /// `validate_list_type`), of elements of kind `.1`.
    List(u8, &'static Known),
    /// A struct whose fields the function names.
    Fields(fn(i16) -> Known),
    /// A union whose variants the function names (`None`: parquet fails).
    Union(fn(i16) -> Option<Known>),
    /// An unknown field: skipped by the type its header gives.
    Skip,
}

/// Thrift compact element types, as a list header gives them.
const I32: u8 = 5;
const I64: u8 = 6;
const STRUCT: u8 = 12;

const INT: Known = Known::Int;
const KEY_VALUE: Known = Known::Fields(|f| match f {
    1 | 2 => Known::Str,
    _ => Known::Skip,
});
/// `ColumnOrder`: a union of empty structs; an unknown variant is skipped.
const COLUMN_ORDER: Known = Known::Union(|id| {
    Some(match id {
        1..=3 => Known::Empty,
        _ => Known::Skip,
    })
});
const TIME_UNIT: Known = Known::Union(|id| (1..=3).contains(&id).then_some(Known::Empty));
const LOGICAL_TYPE: Known = Known::Union(|id| {
    Some(match id {
        1..=4 | 6 | 11..=15 | 19 => Known::Empty,
        // DecimalType: scale, precision.
        5 => Known::Fields(|f| match f {
            1 | 2 => Known::Int,
            _ => Known::Skip,
        }),
        // TimeType and TimestampType: isAdjustedToUTC, unit.
        7 | 8 => Known::Fields(|f| match f {
            1 => Known::Bool,
            2 => TIME_UNIT,
            _ => Known::Skip,
        }),
        // IntType: bitWidth, isSigned.
        10 => Known::Fields(|f| match f {
            1 => Known::Byte,
            2 => Known::Bool,
            _ => Known::Skip,
        }),
        // VariantType: specification_version.
        16 => Known::Fields(|f| match f {
            1 => Known::Byte,
            _ => Known::Skip,
        }),
        // GeometryType: crs.
        17 => Known::Fields(|f| match f {
            1 => Known::Str,
            _ => Known::Skip,
        }),
        // GeographyType: crs, algorithm.
        18 => Known::Fields(|f| match f {
            1 => Known::Str,
            2 => Known::Int,
            _ => Known::Skip,
        }),
        _ => Known::Skip,
    })
});
/// `SchemaElement` (its `num_children`, field 5, is read apart).
fn schema_element(f: i16) -> Known {
    match f {
        1..=3 | 5..=9 => Known::Int,
        4 => Known::Str,
        10 => LOGICAL_TYPE,
        _ => Known::Skip,
    }
}
const STATISTICS: Known = Known::Fields(|f| match f {
    1 | 2 | 5 | 6 => Known::Bin,
    3 | 4 | 9 => Known::Int,
    7 | 8 => Known::Bool,
    _ => Known::Skip,
});
const PAGE_ENCODING_STATS: Known = Known::Fields(|f| match f {
    1..=3 => Known::Int,
    _ => Known::Skip,
});
const SIZE_STATISTICS: Known = Known::Fields(|f| match f {
    1 => Known::Int,
    2 | 3 => Known::List(I64, &INT),
    _ => Known::Skip,
});
const GEOSPATIAL_STATISTICS: Known = Known::Fields(|f| match f {
    // BoundingBox: eight doubles.
    1 => Known::Fields(|f| match f {
        1..=8 => Known::Double,
        _ => Known::Skip,
    }),
    2 => Known::List(I32, &INT),
    _ => Known::Skip,
});
/// `ColumnMetaData`, as parquet's `read_column_metadata` reads it
/// (`path_in_schema` and `key_value_metadata` are skipped by type).
const COLUMN_META_DATA: Known = Known::Fields(|f| match f {
    1 | 4..=7 | 9..=11 | 14 | 15 => Known::Int,
    2 => Known::List(I32, &INT),
    12 => STATISTICS,
    13 => Known::List(STRUCT, &PAGE_ENCODING_STATS),
    16 => SIZE_STATISTICS,
    17 => GEOSPATIAL_STATISTICS,
    _ => Known::Skip,
});
/// `ColumnChunk`, as parquet's `read_column_chunk` reads it (built
/// without encryption, it skips fields 8 and 9 by type).
const COLUMN_CHUNK: Known = Known::Fields(|f| match f {
    1 => Known::Str,
    2 | 4..=7 => Known::Int,
    3 => COLUMN_META_DATA,
    _ => Known::Skip,
});
const SORTING_COLUMN: Known = Known::Fields(|f| match f {
    1 => Known::Int,
    2 | 3 => Known::Bool,
    _ => Known::Skip,
});
/// `RowGroup`, as parquet's `read_row_group` reads it.
const ROW_GROUP: Known = Known::Fields(|f| match f {
    1 => Known::List(STRUCT, &COLUMN_CHUNK),
    2 | 3 | 5 | 7 => Known::Int,
    4 => Known::List(STRUCT, &SORTING_COLUMN),
    _ => Known::Skip,
});

impl Strict<'_> {
    /// One value of kind `known` whose field header gave type `ty`.
    fn known_value(&mut self, known: Known, ty: u8) -> Option<()> {
        let input = &mut self.input;
        match known {
            Known::Int => input.varint().map(|_| ()),
            Known::Bool => matches!(ty, 1 | 2).then_some(()),
            Known::Byte => input.skip(1),
            Known::Double => input.skip(8),
            Known::Str | Known::Bin => {
                let n = input.varint()?;
                let start = input.at;
                input.skip(n)?;
                let utf8 = std::str::from_utf8(&input.bytes[start..input.at]).is_ok();
                (utf8 || matches!(known, Known::Bin)).then_some(())
            }
            Known::Empty => (input.byte()? == 0).then_some(()),
            Known::List(element, kind) => {
                for _ in 0..self.list_of(element)? {
                    self.known_value(*kind, element)?;
                }
                Some(())
            }
            Known::Fields(kind) => self.record_with(kind, |_, _| {}),
            Known::Union(variant) => self.union(variant),
            Known::Skip => self.value(ty, 64),
        }
    }

    /// A struct whose fields `kind` knows (the others are skipped),
    /// handing each `Int` field to `int` after it is read.
    fn record_with(
        &mut self,
        kind: impl Fn(i16) -> Known,
        mut int: impl FnMut(i16, i64),
    ) -> Option<()> {
        let mut last = 0;
        loop {
            let (ty, id) = self.input.field(last)?;
            if ty == 0 {
                return Some(());
            }
            match kind(id) {
                Known::Int => int(id, self.input.zigzag_i32()?),
                known => self.known_value(known, ty)?,
            }
            last = id;
        }
    }

    /// A struct parquet knows whose fields `int` are integers and `bool`
    /// booleans (the others skipped); sets `found` to its integer field
    /// `wanted` (`None` when absent).
    fn known_int(
        &mut self,
        int: impl Fn(i16) -> bool,
        bool: impl Fn(i16) -> bool,
        wanted: i16,
        found: &mut Option<i64>,
    ) -> Option<()> {
        *found = None;
        self.record_with(
            |f| {
                if int(f) {
                    Known::Int
                } else if bool(f) {
                    Known::Bool
                } else {
                    Known::Skip
                }
            },
            |f, v| {
                if f == wanted {
                    *found = Some(v);
                }
            },
        )
    }

    /// A union: exactly one field, then the end. `variant` gives the
    /// kind of a variant by its id, `None` for one parquet fails on.
    fn union(&mut self, variant: fn(i16) -> Option<Known>) -> Option<()> {
        let (ty, id) = self.input.field(0)?;
        if ty == 0 {
            return None;
        }
        self.known_value(variant(id)?, ty)?;
        let (ty, _) = self.input.field(id)?;
        (ty == 0).then_some(())
    }

    /// A list header as parquet reads it where it expects elements of
    /// type `element` (`validate_list_type`: an empty list written as a
    /// 0 byte counts as a list of bytes): its count, at most `i32::MAX`
    /// and at most the bytes left (parquet fails on the bytes running
    /// out, or before, as every element takes a byte at least).
    fn list_of(&mut self, element: u8) -> Option<u64> {
        let (found, count) = match self.input.list()? {
            (0, 0) => (3, 0),
            (1 | 2, count) => (2, count),
            other => other,
        };
        let left = (self.input.bytes.len() - self.input.at) as u64;
        let expected = if element == 1 { 2 } else { element };
        (found == expected && count <= i32::MAX as u64 && count <= left).then_some(count)
    }
}

/// What lodt checks of a Parquet footer, read as parquet 60 reads a
/// `FileMetaData` (`parquet_metadata_from_bytes`): each field parquet
/// knows by its id, whatever type its field header gives, the others
/// skipped by their type (and a list, set or map of booleans among
/// those refused). A fuzzed footer whose `num_rows` claimed to be a
/// string hid a schema from a walk by header types, where parquet read
/// one that asked for 5.4 GB.
pub(super) struct Footer {
    /// The `num_children` of every element of the schema parquet builds
    /// (its first), in order (0 where unset); `None` when parquet fails
    /// before it has read a whole schema.
    pub children: Option<Vec<i64>>,
    /// The `converted_type` (field 6) of that schema's root element,
    /// when it has one.
    pub root_converted: Option<i64>,
    /// Why lodt refuses the footer, if it does.
    pub refused: Option<String>,
    /// Where the `FileMetaData` ends, when it reads to its end.
    #[cfg_attr(not(test), allow(dead_code))]
    pub end: Option<usize>,
}

/// Reads `footer` as parquet 60 does (see [`Footer`]).
pub(super) fn read_footer(footer: &[u8]) -> Footer {
    let mut strict = Strict {
        input: Input {
            bytes: footer,
            at: 0,
        },
        refused: None,
    };
    let mut children = None;
    let mut root_converted = None;
    let end =
        file_metadata(&mut strict, &mut children, &mut root_converted).map(|()| strict.input.at);
    Footer {
        children,
        root_converted,
        refused: strict.refused,
        end,
    }
}

/// `FileMetaData`; `None` where parquet fails (or lodt refuses).
fn file_metadata(
    strict: &mut Strict<'_>,
    schema: &mut Option<Vec<i64>>,
    root_converted: &mut Option<i64>,
) -> Option<()> {
    let mut last = 0;
    loop {
        let (ty, id) = strict.input.field(last)?;
        match id {
            _ if ty == 0 => return Some(()),
            // The first schema; parquet skips any later one by its type.
            2 if schema.is_none() => {
                let mut children = Vec::new();
                for k in 0..strict.list_of(STRUCT)? {
                    let mut n = 0;
                    strict.record_with(schema_element, |f, v| match f {
                        5 => n = v,
                        6 if k == 0 => *root_converted = Some(v),
                        _ => {}
                    })?;
                    children.push(n);
                }
                *schema = Some(children);
            }
            // Row groups before the schema: parquet fails.
            4 if schema.is_none() => return None,
            1 | 3 => strict.known_value(Known::Int, ty)?,
            4 => strict.known_value(Known::List(STRUCT, &ROW_GROUP), ty)?,
            5 => strict.known_value(Known::List(STRUCT, &KEY_VALUE), ty)?,
            6 => strict.known_value(Known::Str, ty)?,
            7 => strict.known_value(Known::List(STRUCT, &COLUMN_ORDER), ty)?,
            _ => strict.value(ty, 64)?,
        }
        last = id;
    }
}

/// The first schema element whose `num_children` (from
/// [`read_footer`]) is negative or more than the elements after it:
/// `(index, num_children, elements after it)`. parquet sizes a vector by
/// `num_children` before it reads them (2^31 of them asked it for 16 GiB;
/// found by the `convert` fuzz target).
pub(super) fn oversized_group(children: &[i64]) -> Option<(u64, i64, u64)> {
    let count = children.len() as u64;
    children.iter().enumerate().find_map(|(k, &n)| {
        let after = count - k as u64 - 1;
        (n < 0 || n as u64 > after).then_some((k as u64, n, after))
    })
}

/// How deep the schema whose child counts are `children` nests groups
/// (the root is 1), counting no further than just past `limit`.
pub(super) fn schema_depth(children: &[i64], limit: usize) -> usize {
    let mut open: Vec<i64> = Vec::new();
    let mut depth = 0;
    for &n in children {
        if let Some(parent) = open.last_mut() {
            *parent -= 1;
        }
        if n > 0 {
            open.push(n);
            depth = depth.max(open.len());
            if depth > limit {
                return depth;
            }
        } else {
            while open.last().is_some_and(|&left| left <= 0) {
                open.pop();
            }
        }
    }
    depth
}
