//! PaddlePaddle's tensor files: the 2.6.2 fixtures, errors, damage and hostile lengths.

mod paddle_corruption;
mod paddle_errors;
mod paddle_fixtures;
mod paddle_hostile;
