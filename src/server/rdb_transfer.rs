//! Sending a forked child's snapshot to a SYNC/PSYNC client: the connection task streams the
//! pipe the child writes into (with the `$EOF:<mark>` framing or a length header), then reaps
//! the child; the replication stream queued meanwhile follows. The executor side (forking, the
//! reply header, attaching the replica) is `commands::replication`.

use std::io::Read;
use std::os::fd::OwnedFd;

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::executor::clients::{ClientHandle, RdbTransfer};

/// Waits for the snapshot child; SIGKILLs it first when the transfer was abandoned. True when it
/// exited cleanly.
async fn reap(pid: i32, kill: bool) -> bool {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let pid = nix::unistd::Pid::from_raw(pid);
    if kill {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
    loop {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
            Ok(WaitStatus::Exited(_, code)) => return code == 0,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

/// Sends the snapshot of `t` to the client (the framing header, if any, went with the reply),
/// then reaps the child. True when the whole snapshot went out.
/// A CLIENT KILL (or the replica's output limit) abandons the transfer.
pub async fn stream_rdb<S: AsyncWrite + Unpin>(stream: &mut S, t: RdbTransfer, handle: &ClientHandle) -> bool {
    let RdbTransfer { pipe, pid, mark, .. } = t;
    let send = async {
        match mark {
            Some(mark) => send_with_mark(stream, pipe, &mark).await,
            None => send_with_length(stream, pipe, pid).await,
        }
    };
    let killed = async {
        while !handle.close_requested() {
            handle.killed.wait().await;
        }
    };
    let sent = tokio::select! {
        r = send => r,
        _ = killed => Err(std::io::Error::other("the replica was disconnected")),
    };
    let clean = reap(pid, sent.is_err()).await;
    match sent {
        Ok(n) if clean => {
            crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, n);
            tracing::info!("Synchronization with replica succeeded ({n} bytes)");
            true
        }
        Ok(_) => {
            tracing::warn!("SYNC snapshot child {pid} failed");
            false
        }
        Err(e) => {
            tracing::warn!("SYNC transfer aborted: {e}");
            false
        }
    }
}

async fn send_with_mark<S: AsyncWrite + Unpin>(stream: &mut S, pipe: OwnedFd, mark: &[u8]) -> std::io::Result<u64> {
    let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe)?;
    let n = tokio::io::copy(&mut rx, stream).await?;
    stream.write_all(mark).await?;
    stream.flush().await?;
    Ok(n + mark.len() as u64)
}

/// Without `capa eof` the length must come first: the child's output is spooled to a temp file
/// in the working directory (the server's `dir`), then sent and removed.
async fn send_with_length<S: AsyncWrite + Unpin>(stream: &mut S, pipe: OwnedFd, pid: i32) -> std::io::Result<u64> {
    let path = std::path::PathBuf::from(format!("temp-sync-{}-{pid}.rdb", std::process::id()));
    let spool = path.clone();
    let spooled = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
        let mut src = std::fs::File::from(pipe);
        let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&spool)?;
        std::io::copy(&mut src, &mut f)?;
        Ok(f)
    })
    .await
    .map_err(std::io::Error::other);
    let result = async {
        let mut f = spooled??;
        let len = f.metadata()?.len();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0))?;
        stream.write_all(format!("${len}\r\n").as_bytes()).await?;
        let mut buf = vec![0u8; 1 << 16];
        let mut sent = 0u64;
        while sent < len {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            stream.write_all(&buf[..n]).await?;
            sent += n as u64;
        }
        stream.flush().await?;
        Ok(sent)
    }
    .await;
    let _ = std::fs::remove_file(&path);
    result
}
