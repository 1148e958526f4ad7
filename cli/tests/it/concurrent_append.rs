//! One writer at a time, and nothing lost (issue 9, parts 3 and 8): real
//! processes appending, recovering and replacing one file at once, killed
//! with SIGKILL at random points, or stopped by a full disk.
//!
//! The processes are this test binary itself, re-run with `LODT_CHILD`
//! naming a role (see [`child`]). Set `LODT_SEED` to replay the random kill
//! delays of a run (each test prints its seed).

use lodt::atomic::AtomicError;
use lodt::format::{self, FormatError, LodtFile, WriteOptions, Writer};
use lodt::{Batch, Lod, LodTensor};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Exit code of a child refused with `AtomicError::Locked`.
const LOCKED: i32 = 3;
/// Exit code of a child whose write failed for lack of room.
const NO_ROOM: i32 = 4;

/// A batch that says which it is: tensor `v` of `elems` `i64`s derived from
/// `tag`, with a 1-level LoD, and metadata `tag`.
fn tagged(tag: u64, elems: usize) -> Batch {
    let values: Vec<i64> = (0..elems as i64).map(|i| tag as i64 * 7 + i).collect();
    let half = elems as u64 / 2;
    let lod = Lod::try_from_lengths(&[vec![half, elems as u64 - half]]).unwrap();
    let v = LodTensor::from_vec(values, vec![elems], lod).unwrap();
    let mut b = Batch::try_from_tensors([("v", v)]).unwrap();
    b.metadata_mut().insert("tag".into(), tag.to_string());
    b
}

/// The size of the batch of `tag` in the kill tests (8 KiB to 320 KiB).
fn elems_of(tag: u64) -> usize {
    1000 + (tag as usize * 7919) % 40_000
}

/// The tags of every batch of the file at `path`, after checking every
/// checksum and that each batch is exactly what its tag says.
fn tags(path: &Path, elems: impl Fn(u64) -> usize) -> Vec<u64> {
    let file = LodtFile::open(path).unwrap();
    file.verify().unwrap();
    (0..file.num_batches())
        .map(|k| {
            let batch = file.read_batch(k).unwrap();
            let tag: u64 = batch.metadata()["tag"].parse().unwrap();
            assert_eq!(batch, tagged(tag, elems(tag)), "batch {k} of {path:?}");
            tag
        })
        .collect()
}

/// A file of batches tagged `tags` (each `elems(tag)` long).
fn write_file(path: &Path, tags: impl IntoIterator<Item = u64>, elems: impl Fn(u64) -> usize) {
    let mut w = Writer::create_with(
        path,
        Default::default(),
        WriteOptions {
            fsync: false,
            ..Default::default()
        },
    )
    .unwrap();
    for tag in tags {
        w.write(&tagged(tag, elems(tag))).unwrap();
    }
    w.finish().unwrap();
}

fn temps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn env_u64(name: &str, default: u64) -> u64 {
    env(name).map_or(default, |v| v.parse().unwrap())
}

/// Waits until `path` exists (the other side of a handshake).
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{path:?} never appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `path` exists, written by `child`; fails at once, with the
/// child's output, if the child exits first.
fn wait_for_child(path: &Path, child: &mut Child) {
    let start = Instant::now();
    while !path.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the child exited ({status}) before writing {path:?}: {err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{path:?} never appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The exit code for a failed write.
fn code_of(e: &FormatError) -> i32 {
    use std::io::ErrorKind::{FileTooLarge, QuotaExceeded, StorageFull};
    match e {
        FormatError::Atomic(AtomicError::Locked { .. }) => LOCKED,
        FormatError::Io { source, .. }
            if matches!(source.kind(), FileTooLarge | StorageFull | QuotaExceeded) =>
        {
            NO_ROOM
        }
        _ => 1,
    }
}

fn exit_with(r: Result<(), FormatError>) -> ! {
    match r {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("child error: {e}");
            std::process::exit(code_of(&e))
        }
    }
}

/// Appends `LODT_COUNT` batches tagged from `LODT_TAG`, after `LODT_START`
/// exists (if named); creates `LODT_READY` after `LODT_READY_AFTER` batches
/// and waits for `LODT_GO` before finishing (if named).
fn child_append(path: &Path) -> Result<(), FormatError> {
    if let Some(start) = env("LODT_START") {
        wait_for(Path::new(&start));
    }
    let first = env_u64("LODT_TAG", 0);
    let count = env_u64("LODT_COUNT", 1);
    let elems = env_u64("LODT_ELEMS", 100) as usize;
    let ready_after = env_u64("LODT_READY_AFTER", 1);
    let mut w = Writer::append_with(
        path,
        WriteOptions {
            fsync: false,
            ..Default::default()
        },
    )?;
    for i in 0..count {
        w.write(&tagged(first + i, elems))?;
        if i + 1 == ready_after
            && let Some(ready) = env("LODT_READY")
        {
            std::fs::write(ready, b"").unwrap();
        }
    }
    if let Some(go) = env("LODT_GO") {
        wait_for(Path::new(&go));
    }
    w.finish()?;
    Ok(())
}

/// Appends one batch per append, forever, printing `committed TAG` after
/// each `finish`.
fn child_append_loop(path: &Path) -> Result<(), FormatError> {
    let mut out = std::io::stdout().lock();
    loop {
        let mut w = Writer::append_with(
            path,
            WriteOptions {
                fsync: false,
                ..Default::default()
            },
        )?;
        let tag = w.batches_written() as u64;
        w.write(&tagged(tag, elems_of(tag)))?;
        w.finish()?;
        writeln!(out, "committed {tag}").unwrap();
        out.flush().unwrap();
    }
}

/// Replaces the file with `LODT_COUNT` batches tagged from 500.
fn child_create(path: &Path) -> Result<(), FormatError> {
    let mut w = Writer::create(path, Default::default())?;
    for tag in 500..500 + env_u64("LODT_COUNT", 1) {
        w.write(&tagged(tag, elems_of(tag)))?;
    }
    w.finish()?;
    Ok(())
}

/// On a 4 MiB tmpfs: an append that does not fit is rolled back, and a
/// footer-less file that cannot be copied is recovered in place.
fn child_full_disk(path: &Path) -> Result<(), FormatError> {
    let elems = |_| 12_500; // 100 KB a batch
    write_file(path, 0..26, elems);
    let before = std::fs::read(path).unwrap();
    let mut w = Writer::append(path)?;
    let err = w
        .write(&tagged(26, 250_000))
        .and_then(|()| w.finish().map(drop))
        .unwrap_err();
    assert_eq!(code_of(&err), NO_ROOM, "{err}");
    assert!(err.to_string().contains("rolled back"), "{err}");
    assert_eq!(std::fs::read(path).unwrap(), before);
    println!("append rolled back: {err}");
    let len = before.len() as u64;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(len - 30).unwrap();
    drop(f);
    let report = format::recover(path)?;
    let n = tags(path, elems).len();
    println!(
        "recovered in_place={} batches={} files={n}",
        report.in_place, report.batches
    );
    Ok(())
}

/// The entry point of the child processes: a no-op unless `LODT_CHILD`
/// names a role.
#[test]
fn child() {
    let Some(role) = env("LODT_CHILD") else {
        return;
    };
    let path = PathBuf::from(env("LODT_FILE").unwrap());
    let r = match role.as_str() {
        "append" => child_append(&path),
        "append-loop" => child_append_loop(&path),
        "append-big" => Writer::append(&path).and_then(|mut w| {
            w.write(&tagged(99, env_u64("LODT_ELEMS", 1) as usize))?;
            w.finish().map(drop)
        }),
        "recover" => format::recover(&path).map(drop),
        "create" => child_create(&path),
        "full-disk" => child_full_disk(&path),
        other => panic!("unknown role {other}"),
    };
    exit_with(r)
}

/// The name of the [`child`] test in this test binary: its module path
/// less the crate's name.
fn child_test() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, m)| m);
    format!("{module}::child")
}

/// This test binary, run as a child in `role` on `file`.
fn child_command(role: &str, file: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        child_test().as_str(),
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .env("LODT_CHILD", role)
    .env("LODT_FILE", file)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.spawn().unwrap()
}

/// Waits for `child`; returns its exit code and stderr.
fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn lodt(args: &[&Path]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lodt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A small random generator (xorshift64*), seeded from `LODT_SEED` or the clock.
struct Rng(u64);

impl Rng {
    fn new(test: &str) -> Self {
        let seed = env("LODT_SEED").filter(|s| !s.is_empty()).map_or_else(
            || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            },
            |s| s.parse().unwrap(),
        );
        eprintln!("{test}: LODT_SEED={seed}");
        Rng(seed)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

#[test]
fn a_second_writer_is_refused_while_an_append_runs_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.lodt");
    write_file(&path, 0..2, |_| 100);
    let (ready, go) = (dir.path().join("ready"), dir.path().join("go"));
    // A: 20 batches of 80 KB (more than the writer's buffer, so the old
    // footer is overwritten), pausing after 6 of them.
    let mut a = spawn(
        child_command("append", &path)
            .env("LODT_TAG", "100")
            .env("LODT_COUNT", "20")
            .env("LODT_ELEMS", "10000")
            .env("LODT_READY_AFTER", "6")
            .env("LODT_READY", &ready)
            .env("LODT_GO", &go),
    );
    wait_for_child(&ready, &mut a);
    let inode = std::fs::metadata(&path).unwrap().ino();

    // Another process appending: refused with the clear error.
    let b = spawn(child_command("append", &path).env("LODT_TAG", "200"));
    let (code, err) = finish(b);
    assert_eq!(code, LOCKED, "{err}");
    assert!(err.contains("is being written by another process"), "{err}");
    // recover (as `lodt info` used to advise): refused, nothing renamed.
    let (code, err) = lodt(&[Path::new("recover"), &path]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is being written by another process"), "{err}");
    let (code, err) = lodt(&[Path::new("info"), &path]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is being written by another process"), "{err}");
    assert!(!err.contains("recover"), "{err}");
    // In this process too: append, recover, and a replacement of the file.
    let locked = |r: Result<(), FormatError>| {
        let e = r.unwrap_err();
        assert!(
            matches!(e, FormatError::Atomic(AtomicError::Locked { .. })),
            "{e}"
        );
    };
    locked(Writer::append(&path).map(drop));
    locked(format::recover(&path).map(drop));
    locked(format::save_batch(&path, &tagged(300, 1)));
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    assert_eq!(temps(dir.path()), Vec::<String>::new());

    std::fs::write(&go, b"").unwrap();
    let (code, err) = finish(a);
    assert_eq!(code, 0, "{err}");
    let expected: Vec<u64> = (0..2).chain(100..120).collect();
    assert_eq!(tags(&path, |t| if t < 100 { 100 } else { 10000 }), expected);
}

#[test]
fn racing_appenders_never_lose_or_corrupt_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.lodt");
    write_file(&path, [0], |_| 50);
    let mut expected = vec![0];
    let (mut won, mut refused) = (0, 0);
    for round in 0..10u64 {
        let start = dir.path().join(format!("start{round}"));
        let children: Vec<(u64, Child)> = (0..3u64)
            .map(|c| {
                let first = 1000 * (round + 1) + 100 * c;
                let child = spawn(
                    child_command("append", &path)
                        .env("LODT_TAG", first.to_string())
                        .env("LODT_COUNT", "4")
                        .env("LODT_ELEMS", "30000")
                        .env("LODT_START", &start),
                );
                (first, child)
            })
            .collect();
        std::fs::write(&start, b"").unwrap();
        let mut winners = Vec::new();
        for (first, child) in children {
            let (code, err) = finish(child);
            match code {
                0 => winners.push(first),
                LOCKED => {
                    assert!(err.contains("is being written by another process"), "{err}");
                    refused += 1;
                }
                _ => panic!("appender {first} failed: {err}"),
            }
        }
        won += winners.len();
        // Every winner's 4 batches are in the file, together; no loser's are.
        let found = tags(&path, |t| if t == 0 { 50 } else { 30_000 });
        let new = &found[expected.len()..];
        assert_eq!(&found[..expected.len()], &expected[..]);
        assert_eq!(new.len(), 4 * winners.len(), "round {round}: {found:?}");
        for group in new.chunks(4) {
            let first = group[0];
            assert!(winners.contains(&first), "round {round}: {found:?}");
            assert_eq!(group, &[first, first + 1, first + 2, first + 3]);
        }
        expected = found;
    }
    eprintln!("racing appenders: {won} appends committed, {refused} refused, none lost");
    assert!(won >= 10);
}

#[test]
fn kill_9_during_appends_keeps_every_committed_batch() {
    let mut rng = Rng::new("kill_9_during_appends");
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template.lodt");
    write_file(&template, 0..2, elems_of);
    let path = dir.path().join("log.lodt");
    let runs = 40;
    let (mut direct, mut recovered, mut committed_total, mut extra_total) = (0, 0, 0, 0);
    for run in 0..runs {
        std::fs::copy(&template, &path).unwrap();
        let mut child = spawn(&mut child_command("append-loop", &path));
        let delay = rng.below(120);
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap();
        let status: ExitStatus = child.wait().unwrap();
        assert_eq!(status.code(), None, "run {run}: the child ended by itself");
        let committed = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map(|l| l.unwrap())
            .filter(|l| l.starts_with("committed "))
            .count() as u64;
        match LodtFile::open(&path) {
            Ok(_) => direct += 1,
            Err(FormatError::NoFooter { .. }) => {
                let report = format::recover(&path).unwrap();
                assert!(report.rewritten);
                recovered += 1;
            }
            Err(e) => panic!("run {run} (killed after {delay} ms): {e}"),
        }
        let found = tags(&path, elems_of);
        // Every committed batch, in order; possibly more (complete batches
        // of the killed append, kept by recover), never fewer.
        assert!(found.len() as u64 >= 2 + committed, "run {run}: {found:?}");
        assert_eq!(found, (0..found.len() as u64).collect::<Vec<_>>());
        committed_total += committed;
        extra_total += found.len() as u64 - 2 - committed;
        assert_eq!(temps(dir.path()), Vec::<String>::new());
    }
    eprintln!(
        "kill -9 during appends: {runs} runs, {committed_total} appends committed before the kill, \
         all found; {direct} files opened as they were, {recovered} needed recover, which kept \
         {extra_total} complete uncommitted batches too"
    );
}

/// How long `cmd` takes when not killed (to spread the kill delays over it).
fn calibrate(mut cmd: Command) -> u64 {
    let start = Instant::now();
    let (code, err) = finish(spawn(&mut cmd));
    assert_eq!(code, 0, "{err}");
    start.elapsed().as_millis() as u64
}

#[test]
fn kill_9_during_recover_or_replace_leaves_a_whole_file_and_stale_temps_are_cleaned() {
    let mut rng = Rng::new("kill_9_during_recover_or_replace");
    let dir = tempfile::tempdir().unwrap();
    // A file cut during an append: 40 complete batches (about 6 MB), no footer.
    let cut = dir.path().join("cut.template");
    write_file(&cut, 0..40, elems_of);
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 100)
        .unwrap();
    let cut_bytes = std::fs::read(&cut).unwrap();
    let path = dir.path().join("data.lodt");
    let all: Vec<u64> = (0..40).collect();

    std::fs::copy(&cut, &path).unwrap();
    let span = calibrate(child_command("recover", &path));
    assert_eq!(tags(&path, elems_of), all);
    let runs = 25;
    let (mut before_rename, mut after_rename, mut stale) = (0, 0, 0);
    for run in 0..runs {
        std::fs::copy(&cut, &path).unwrap();
        let mut child = spawn(&mut child_command("recover", &path));
        let delay = rng.below(span * 3 / 2 + 1);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        child.wait().unwrap();
        // Either the old bytes or the whole recovered file: nothing between.
        if std::fs::read(&path).unwrap() == cut_bytes {
            before_rename += 1;
        } else {
            assert_eq!(tags(&path, elems_of), all, "run {run}");
            after_rename += 1;
        }
        stale += temps(dir.path()).len();
        // The next recover cleans what the killed one left.
        format::recover(&path).unwrap();
        assert_eq!(tags(&path, elems_of), all, "run {run}");
        assert_eq!(temps(dir.path()), Vec::<String>::new(), "run {run}");
    }
    eprintln!(
        "kill -9 during recover: {runs} runs over ~{span} ms; killed before the rename {before_rename}, \
         after {after_rename}; {stale} stale temp files left, all cleaned by the next recover"
    );

    // A replacement (Writer::create of 30 batches) killed over a valid file.
    let old: Vec<u64> = (0..5).collect();
    let new: Vec<u64> = (500..530).collect();
    write_file(&path, old.clone(), elems_of);
    let mut calib = child_command("create", &path);
    calib.env("LODT_COUNT", "30");
    let span = calibrate(calib);
    let (mut olds, mut news, mut stale) = (0, 0, 0);
    for run in 0..runs {
        write_file(&path, old.clone(), elems_of);
        let mut cmd = child_command("create", &path);
        let mut child = spawn(cmd.env("LODT_COUNT", "30"));
        let delay = rng.below(span * 3 / 2 + 1);
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        child.wait().unwrap();
        let found = tags(&path, elems_of);
        if found == old {
            olds += 1;
        } else {
            assert_eq!(found, new, "run {run}");
            news += 1;
        }
        stale += temps(dir.path()).len();
        // The next writer (an append here) cleans what the killed one left.
        Writer::append(&path).unwrap().finish().unwrap();
        assert_eq!(temps(dir.path()), Vec::<String>::new(), "run {run}");
    }
    eprintln!(
        "kill -9 during a replacement: {runs} runs over ~{span} ms; old file kept {olds}, new file \
         complete {news}; {stale} stale temp files left, all cleaned by the next writer"
    );
}

#[test]
fn an_append_past_the_file_size_limit_fails_cleanly_and_keeps_the_old_footer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.lodt");
    write_file(&path, 0..3, |_| 1000);
    let before = std::fs::read(&path).unwrap();
    let exe = std::env::current_exe().unwrap();
    // `ulimit -f 200`: at most 100 KiB (dash) or 200 KiB (bash) per file;
    // SIGXFSZ ignored so that the write fails with EFBIG instead.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' XFSZ; ulimit -f 200 && exec "$0" "$@""#)
        .arg(exe)
        .args([
            "--exact",
            child_test().as_str(),
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("LODT_CHILD", "append-big")
        .env("LODT_FILE", &path)
        .env("LODT_ELEMS", "100000")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(NO_ROOM), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(
        err.contains("was rolled back: the file is as it was before"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(tags(&path, |_| 1000), vec![0, 1, 2]);
    // And it takes appends again.
    let mut w = Writer::append(&path).unwrap();
    w.write(&tagged(3, 1000)).unwrap();
    w.finish().unwrap();
    assert_eq!(tags(&path, |_| 1000), vec![0, 1, 2, 3]);
}

#[test]
fn on_a_full_disk_appends_roll_back_and_recover_repairs_in_place() {
    // A real full disk: a 4 MiB tmpfs, mounted in a private mount namespace
    // (`unshare -r -m`, no privileges needed where user namespaces are on).
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let out = Command::new("unshare")
        .args(["-r", "-m", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=4m tmpfs "$0" && echo MOUNTED && exec "$@""#)
        .arg(&mount)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            child_test().as_str(),
            "--nocapture",
            "--test-threads=1",
            "-q",
        ])
        .env("LODT_CHILD", "full-disk")
        .env("LODT_FILE", mount.join("x.lodt"))
        .output();
    let out = match out {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("MOUNTED") => out,
        other => {
            skipped(
                "concurrent_append (full disk)",
                &format!("cannot mount a tmpfs in a user namespace here ({other:?})"),
            );
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("append rolled back: "), "{stdout}");
    assert!(stdout.contains("No space left on device"), "{stdout}");
    assert!(
        stdout.contains("recovered in_place=true batches=26 files=26"),
        "{stdout}"
    );
}

/// Reports a skipped test: on stderr, and as a line of
/// `target/tmp/skipped-tests.txt`, which `scripts/test` prints (and counts)
/// at the end of its output, so a skip is never mistaken for a pass.
fn skipped(test: &str, reason: &str) {
    use std::io::Write;
    eprintln!("SKIPPED: {reason}");
    let list = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list)
    {
        let _ = writeln!(file, "{test}: {reason}");
    }
}
