//! The WASI a component gets on the synchronous path: everything that
//! cannot wait.
//!
//! Policies that import nothing asynchronous are called without a fiber
//! (see [`super::runtime`]). wasmtime-wasi's own synchronous bindings would
//! not do for them: their blocking operations enter the Tokio runtime with
//! `block_on`, which panics on a runtime thread — where every policy runs.
//! So this linker provides the WASI interfaces that never wait (clocks,
//! random, environment, exit, the stdio getters), and `wasi:io` through
//! [`NoWait`]: each operation is tried once, and one that would have to wait
//! traps instead ("would block"). A synchronous component's streams are the
//! host's own never-blocking ones (stdout a sink, stderr the tail kept for
//! trap reports), so in practice nothing traps. Everything else a component
//! on this path imports (the file system and sockets, which it is granted
//! none of) is defined per component as a function that traps.

use futures::FutureExt;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::{DynPollable, StreamError, StreamResult};
use wasmtime_wasi_io::bindings::wasi::io::{poll as async_poll, streams as async_streams};
use wasmtime_wasi_io::streams::{DynInputStream, DynOutputStream};

/// `wasi:io` over a resource table, without waiting.
pub struct NoWait<'a>(&'a mut ResourceTable);

struct NoWaitData;

impl HasData for NoWaitData {
    type Data<'a> = NoWait<'a>;
}

/// The operation would have had to wait.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{0}` would block, and this component runs on the host's synchronous path (it imports nothing asynchronous); it may not wait for I/O"
)]
pub struct WouldBlock(&'static str);

fn now<T>(what: &'static str, fut: impl std::future::Future<Output = T>) -> wasmtime::Result<T> {
    fut.now_or_never().ok_or_else(|| WouldBlock(what).into())
}

/// Add the non-waiting WASI interfaces to `linker`.
pub fn add_to_linker<T: WasiView>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, random};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
    let l = linker;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    random::random::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, T::random)?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, T::random)?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    wasmtime_wasi_io::bindings::wasi::io::error::add_to_linker::<T, WasiIoError>(l, |t| {
        t.ctx().table
    })?;
    poll::add_to_linker::<T, NoWaitData>(l, |t| NoWait(t.ctx().table))?;
    streams::add_to_linker::<T, NoWaitData>(l, |t| NoWait(t.ctx().table))?;
    Ok(())
}

struct WasiIoError;

impl HasData for WasiIoError {
    type Data<'a> = &'a mut ResourceTable;
}

/// Shorthand for the view's table.
fn table<'a>(v: &'a mut NoWait<'_>) -> &'a mut ResourceTable {
    v.0
}

impl streams::Host for NoWait<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        Ok(
            match async_streams::Host::convert_stream_error(table(self), err)? {
                async_streams::StreamError::LastOperationFailed(e) => {
                    streams::StreamError::LastOperationFailed(e)
                }
                async_streams::StreamError::Closed => streams::StreamError::Closed,
            },
        )
    }
}

impl streams::HostOutputStream for NoWait<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        now(
            "output-stream.drop",
            async_streams::HostOutputStream::drop(table(self), stream),
        )?
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        async_streams::HostOutputStream::check_write(table(self), stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        async_streams::HostOutputStream::write(table(self), stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        now(
            "output-stream.blocking-write-and-flush",
            async_streams::HostOutputStream::blocking_write_and_flush(table(self), stream, bytes),
        )
        .map_err(StreamError::Trap)?
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        now(
            "output-stream.blocking-write-zeroes-and-flush",
            async_streams::HostOutputStream::blocking_write_zeroes_and_flush(
                table(self),
                stream,
                len,
            ),
        )
        .map_err(StreamError::Trap)?
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        async_streams::HostOutputStream::subscribe(table(self), stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        async_streams::HostOutputStream::write_zeroes(table(self), stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        async_streams::HostOutputStream::flush(table(self), stream)
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        now(
            "output-stream.blocking-flush",
            async_streams::HostOutputStream::blocking_flush(table(self), stream),
        )
        .map_err(StreamError::Trap)?
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        async_streams::HostOutputStream::splice(table(self), dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        now(
            "output-stream.blocking-splice",
            async_streams::HostOutputStream::blocking_splice(table(self), dst, src, len),
        )
        .map_err(StreamError::Trap)?
    }
}

impl streams::HostInputStream for NoWait<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        now(
            "input-stream.drop",
            async_streams::HostInputStream::drop(table(self), stream),
        )?
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        async_streams::HostInputStream::read(table(self), stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        now(
            "input-stream.blocking-read",
            async_streams::HostInputStream::blocking_read(table(self), stream, len),
        )
        .map_err(StreamError::Trap)?
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        async_streams::HostInputStream::skip(table(self), stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        now(
            "input-stream.blocking-skip",
            async_streams::HostInputStream::blocking_skip(table(self), stream, len),
        )
        .map_err(StreamError::Trap)?
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        async_streams::HostInputStream::subscribe(table(self), stream)
    }
}

impl poll::Host for NoWait<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        now("poll", async_poll::Host::poll(table(self), pollables))?
    }
}

impl poll::HostPollable for NoWait<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        now(
            "pollable.ready",
            async_poll::HostPollable::ready(table(self), pollable),
        )?
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        now(
            "pollable.block",
            async_poll::HostPollable::block(table(self), pollable),
        )?
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(table(self), pollable)
    }
}
