//! The `sql` interface's values in PostgreSQL's types, both ways.
//!
//! Parameters take the type PostgreSQL inferred for their placeholder: an
//! integer binds to int2/int4/int8 (range-checked), float4/float8 or bool
//! (0 is false); a real to float4/float8; text to the text types; a blob to
//! bytea; null to anything. Columns: int2/int4/int8 and bool (0/1, as
//! SQLite answers comparisons) are integers, float4/float8 reals, the text
//! types text, bytea a blob. Any other column type is refused, so a guest
//! never sees a value one engine would give and the other would not.

use super::super::engine::Value;
use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

/// Bytes charged per value on top of its payload (as on SQLite).
pub const VALUE_OVERHEAD: usize = 16;

/// A parameter the guest gave that its placeholder's type cannot hold.
#[derive(Debug, thiserror::Error)]
#[error("a {value} parameter does not fit a {ty} placeholder")]
pub struct ParamMismatch {
    value: &'static str,
    ty: String,
}

/// A guest value bound to a placeholder of the type PostgreSQL inferred.
#[derive(Debug)]
pub struct Param<'a>(pub &'a Value);

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Integer(_) => "integer",
        Value::Real(_) => "real",
        Value::Text(_) => "text",
        Value::Blob(_) => "blob",
    }
}

fn is_text(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

impl ToSql for Param<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let mismatch = || -> Box<dyn std::error::Error + Sync + Send> {
            Box::new(ParamMismatch {
                value: kind(self.0),
                ty: ty.name().to_owned(),
            })
        };
        match (self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Integer(i), &Type::INT4) => {
                i32::try_from(*i).map_err(|_| mismatch())?.to_sql(ty, out)
            }
            (Value::Integer(i), &Type::INT2) => {
                i16::try_from(*i).map_err(|_| mismatch())?.to_sql(ty, out)
            }
            (Value::Integer(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Value::Integer(i), &Type::FLOAT4) => (*i as f32).to_sql(ty, out),
            (Value::Integer(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (Value::Text(s), t) if is_text(t) => s.as_str().to_sql(ty, out),
            (Value::Blob(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
            _ => Err(mismatch()),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked per value in `to_sql`, which knows the value's kind.
        true
    }

    to_sql_checked!();
}

/// A column of a type the `sql` interface has no value for.
#[derive(Debug, thiserror::Error)]
#[error("unsupported column type {0}")]
pub struct UnsupportedColumn(pub String);

/// Whether values of `ty` can be returned (checked once per statement,
/// before any row is read).
pub fn check_column(ty: &Type) -> Result<(), UnsupportedColumn> {
    match *ty {
        Type::INT2
        | Type::INT4
        | Type::INT8
        | Type::BOOL
        | Type::FLOAT4
        | Type::FLOAT8
        | Type::BYTEA => Ok(()),
        ref t if is_text(t) => Ok(()),
        ref t => Err(UnsupportedColumn(t.name().to_owned())),
    }
}

/// A column value as the raw bytes PostgreSQL sent, so its size is known
/// before anything is copied.
pub struct Raw<'a>(pub Option<&'a [u8]>);

impl<'a> FromSql<'a> for Raw<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(Some(raw)))
    }
    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(None))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

impl Raw<'_> {
    /// The bytes this value is charged: its payload for text and blobs,
    /// 8 otherwise (as on SQLite).
    pub fn charge(&self, ty: &Type) -> usize {
        VALUE_OVERHEAD
            + match self.0 {
                Some(raw) if *ty == Type::BYTEA || is_text(ty) => raw.len(),
                _ => 8,
            }
    }

    /// Decode (a column type [`check_column`] accepted).
    pub fn decode(&self, ty: &Type) -> Result<Value, Box<dyn std::error::Error + Sync + Send>> {
        let Some(raw) = self.0 else {
            return Ok(Value::Null);
        };
        Ok(match *ty {
            Type::INT2 => Value::Integer(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Value::Integer(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
            Type::BOOL => Value::Integer(bool::from_sql(ty, raw)?.into()),
            Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::BYTEA => Value::Blob(raw.to_vec()),
            _ => Value::Text(<&str>::from_sql(ty, raw)?.to_owned()),
        })
    }
}
