//! The names of a dataset's objects (`spec/DATASET.md` section 2), in one
//! place: the manifest, partial manifests, shards, and the ids that go into
//! them (writer ids, commit ids). Every writer, reader and cleaner of a
//! dataset — and the Python package, through the native module — names and
//! recognizes objects through these.
//!
//! | object | name |
//! |--------|------|
//! | manifest | [`MANIFEST_NAME`] |
//! | shard of the main manifest's writers | `shard-NNNNNN.lodt` (`shard-TOKEN-NNNNNN.lodt` in a store without locks) |
//! | partial manifest of writer `ID` | [`part_manifest_name`]: `lodt-dataset.part.ID.json` |
//! | shard of writer `ID` | [`part_shard_prefix`] + `NNNNNN.lodt` |
//! | shard index of the manifest written by commit `ID` | [`INDEX_PREFIX`] + `ID` |
//! | the manifest of version `N` | [`version_manifest_name`]: `lodt-dataset.version.N.json` |
//! | tag `NAME` | [`tag_object_name`]: `lodt-dataset.tag.NAME.json` |

/// The name of a dataset's manifest.
///
/// ```
/// assert_eq!(lodt::dataset::MANIFEST_NAME, "lodt-dataset.json");
/// ```
pub const MANIFEST_NAME: &str = "lodt-dataset.json";

/// The start of a shard index's name (`spec/DATASET.md` section 3.2):
/// `lodt-dataset.index.ID`, `ID` the commit id of the commit that wrote it.
///
/// ```
/// assert_eq!(lodt::dataset::names::INDEX_PREFIX, "lodt-dataset.index.");
/// ```
pub const INDEX_PREFIX: &str = "lodt-dataset.index.";

/// Whether `name` is a shard index's name: [`INDEX_PREFIX`] and a valid
/// commit id.
///
/// ```
/// use lodt::dataset::names::valid_index_name;
/// assert!(valid_index_name("lodt-dataset.index.0a1b"));
/// assert!(!valid_index_name("lodt-dataset.index.../x"));
/// ```
pub fn valid_index_name(name: &str) -> bool {
    name.strip_prefix(INDEX_PREFIX).is_some_and(valid_commit_id)
}

/// The longest commit id, in bytes.
pub(crate) const MAX_COMMIT_ID: usize = 128;

/// The longest shard or writer-id name accepted, in bytes.
const MAX_NAME: usize = 200;

/// The start of a partial manifest's name: `lodt-dataset.part.ID.json`.
///
/// ```
/// assert!(lodt::dataset::names::part_manifest_name("w3").starts_with(lodt::dataset::names::PART_PREFIX));
/// ```
pub const PART_PREFIX: &str = "lodt-dataset.part.";
/// The end of a partial manifest's name.
pub(crate) const PART_SUFFIX: &str = ".json";

/// The end of every shard's name.
///
/// ```
/// assert_eq!(lodt::dataset::names::SHARD_SUFFIX, ".lodt");
/// ```
pub const SHARD_SUFFIX: &str = ".lodt";

/// What a writer's id and its shard index are joined by in the name of a
/// part's shard: `ID-shard-NNNNNN.lodt`.
const PART_SHARD_INFIX: &str = "-shard-";

/// The start of the shard names of the writers of the main manifest:
/// `shard-NNNNNN.lodt` (or `shard-TOKEN-NNNNNN.lodt` in a store without
/// locks).
pub(crate) const MAIN_SHARD_PREFIX: &str = "shard-";

/// The name of the partial manifest of writer `id`.
///
/// ```
/// assert_eq!(lodt::dataset::names::part_manifest_name("w3"), "lodt-dataset.part.w3.json");
/// ```
pub fn part_manifest_name(id: &str) -> String {
    format!("{PART_PREFIX}{id}{PART_SUFFIX}")
}

/// The writer id of a partial manifest's name, if it is one.
///
/// ```
/// use lodt::dataset::names::part_writer_id;
/// assert_eq!(part_writer_id("lodt-dataset.part.w3.json"), Some("w3"));
/// assert_eq!(part_writer_id("lodt-dataset.json"), None);
/// assert_eq!(part_writer_id("lodt-dataset.part.a/b.json"), None);
/// ```
pub fn part_writer_id(name: &str) -> Option<&str> {
    name.strip_prefix(PART_PREFIX)?
        .strip_suffix(PART_SUFFIX)
        .filter(|id| valid_writer_id(id))
}

/// The start of the shard names of writer `id` of a part:
/// `ID-shard-` (its shards are `ID-shard-NNNNNN.lodt`).
///
/// ```
/// assert_eq!(lodt::dataset::names::part_shard_prefix("w3"), "w3-shard-");
/// ```
pub fn part_shard_prefix(id: &str) -> String {
    format!("{id}{PART_SHARD_INFIX}")
}

/// The name of shard `index` of a writer whose shard names start with
/// `prefix`: `PREFIX` then six or more decimal digits, then `.lodt`.
pub(crate) fn shard_name(prefix: &str, index: u64) -> String {
    format!("{prefix}{index:06}{SHARD_SUFFIX}")
}

/// The writer id of the name of a part's shard (`ID-shard-NNNNNN.lodt`),
/// if it is one.
///
/// ```
/// use lodt::dataset::names::shard_writer_id;
/// assert_eq!(shard_writer_id("w3-shard-000012.lodt"), Some("w3"));
/// assert_eq!(shard_writer_id("shard-000012.lodt"), None); // the main manifest's
/// assert_eq!(shard_writer_id("w3-shard-x.lodt"), None);
/// ```
pub fn shard_writer_id(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(SHARD_SUFFIX)?;
    let (id, index) = stem.rsplit_once(PART_SHARD_INFIX)?;
    let digits = index.len() >= 6 && index.bytes().all(|b| b.is_ascii_digit());
    (digits && valid_writer_id(id)).then_some(id)
}

/// Whether `name` is a valid shard name: 1 to 200 bytes of ASCII letters,
/// digits, `.`, `_` and `-`, not starting with `.`, ending in `.lodt` (so it
/// names a file in the dataset's directory and nothing else).
///
/// ```
/// use lodt::dataset::names::valid_shard_name;
/// assert!(valid_shard_name("shard-000003.lodt"));
/// assert!(!valid_shard_name("../etc/passwd.lodt"));
/// assert!(!valid_shard_name(".hidden.lodt"));
/// assert!(!valid_shard_name("shard.parquet"));
/// ```
pub fn valid_shard_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && name.len() > ".lodt".len()
        && name.ends_with(".lodt")
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `id` is a valid writer id: 1 to 64 ASCII letters, digits, `_` and
/// `-`.
///
/// ```
/// assert!(lodt::dataset::names::valid_writer_id("host3-rank7"));
/// assert!(!lodt::dataset::names::valid_writer_id("a/b"));
/// assert!(!lodt::dataset::names::valid_writer_id(""));
/// ```
pub fn valid_writer_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// Whether `id` is a valid commit id (`spec/DATASET.md` section 3.1): 1 to
/// 128 ASCII letters, digits, `.`, `_` and `-`.
///
/// ```
/// use lodt::dataset::names::valid_commit_id;
/// assert!(valid_commit_id("ray-0a1b2c3d4e5f-000007"));
/// assert!(valid_commit_id("nightly.2026-11-26"));
/// assert!(!valid_commit_id(""));
/// assert!(!valid_commit_id("a b"));
/// assert!(!valid_commit_id(&"x".repeat(129)));
/// ```
pub fn valid_commit_id(id: &str) -> bool {
    (1..=MAX_COMMIT_ID).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The start of the name of a version's manifest (`spec/DATASET.md` section
/// 3.3): `lodt-dataset.version.N.json`, `N` in decimal without leading zeros.
///
/// ```
/// assert_eq!(lodt::dataset::names::VERSION_PREFIX, "lodt-dataset.version.");
/// ```
pub const VERSION_PREFIX: &str = "lodt-dataset.version.";

/// The start of a tag's name (`spec/DATASET.md` section 3.3):
/// `lodt-dataset.tag.NAME.json`.
///
/// ```
/// assert_eq!(lodt::dataset::names::TAG_PREFIX, "lodt-dataset.tag.");
/// ```
pub const TAG_PREFIX: &str = "lodt-dataset.tag.";

/// The end of the names of version manifests and tags.
const JSON_SUFFIX: &str = ".json";

/// The name of the manifest kept for version `n`.
///
/// ```
/// assert_eq!(lodt::dataset::names::version_manifest_name(12), "lodt-dataset.version.12.json");
/// ```
pub fn version_manifest_name(n: u64) -> String {
    format!("{VERSION_PREFIX}{n}{JSON_SUFFIX}")
}

/// The version number of a version manifest's name, if it is one (decimal,
/// no leading zeros, no sign).
///
/// ```
/// use lodt::dataset::names::version_of_name;
/// assert_eq!(version_of_name("lodt-dataset.version.12.json"), Some(12));
/// assert_eq!(version_of_name("lodt-dataset.version.012.json"), None);
/// assert_eq!(version_of_name("lodt-dataset.json"), None);
/// ```
pub fn version_of_name(name: &str) -> Option<u64> {
    let digits = name
        .strip_prefix(VERSION_PREFIX)?
        .strip_suffix(JSON_SUFFIX)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

/// Whether `name` is a valid tag name: 1 to 64 ASCII letters, digits, `.`,
/// `_` and `-`, not starting with `.`, and not all digits (so that a tag is
/// never taken for a version number).
///
/// ```
/// use lodt::dataset::names::valid_tag_name;
/// assert!(valid_tag_name("run-42.final"));
/// assert!(!valid_tag_name("42"));
/// assert!(!valid_tag_name("a/b"));
/// assert!(!valid_tag_name(".x"));
/// ```
pub fn valid_tag_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with('.')
        && !name.bytes().all(|b| b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The name of the object of tag `name`.
///
/// ```
/// assert_eq!(lodt::dataset::names::tag_object_name("run-42"), "lodt-dataset.tag.run-42.json");
/// ```
pub fn tag_object_name(name: &str) -> String {
    format!("{TAG_PREFIX}{name}{JSON_SUFFIX}")
}

/// The tag name of a tag object's name, if it is one.
///
/// ```
/// use lodt::dataset::names::tag_of_name;
/// assert_eq!(tag_of_name("lodt-dataset.tag.run-42.json"), Some("run-42"));
/// assert_eq!(tag_of_name("lodt-dataset.tag.7.json"), None);
/// ```
pub fn tag_of_name(name: &str) -> Option<&str> {
    name.strip_prefix(TAG_PREFIX)?
        .strip_suffix(JSON_SUFFIX)
        .filter(|t| valid_tag_name(t))
}
