//! Object stores (feature `remote`): checked reads over HTTP, and S3 (moto).

mod read_ahead;
mod remote_checked;
pub(crate) mod remote_s3;
