//! Object stores (feature `remote`): checked reads over HTTP, and S3 (moto).

mod read_ahead;
mod remote_checked;
mod remote_s3;
