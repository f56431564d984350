"""Lanes: the candidate's server and the control's, never both running at once."""

from __future__ import annotations

import os

from qualify.candidate import LoadedCandidate
from qualify.errors import BadInput, RunAborted
from qualify.evidence.store import RunDir
from qualify.httpclient.client import Client
from qualify.records import StrictModel
from qualify.serving.process import ServerProcess, StartFailed

BIND_TRIES = 3  # launches on fresh ports when another process took the picked one


def api_key(loaded: LoadedCandidate) -> str | None:
    env = loaded.candidate.server.api_key_env
    if env is None:
        return None
    value = os.environ.get(env)
    if not value:
        raise BadInput(
            f"{loaded.path} needs an API key",
            [f"server.api_key_env: environment variable {env} is not set (expected the key)"],
        )
    return value


class Launched(StrictModel):
    """One server start of the run, as the identity record keeps it."""

    lane: str
    attempt: int
    healthy_after_s: float
    port: int | None = None


class Lanes:
    """Starts, switches and stops the servers of the candidate and its control."""

    def __init__(self, run: RunDir, lanes: dict[str, LoadedCandidate]) -> None:
        self.run = run
        self.loaded = lanes
        self.current: str | None = None
        self.process: ServerProcess | None = None
        self._client: Client | None = None
        self.launches: list[Launched] = []
        for lc in lanes.values():
            run.redactor.add(api_key(lc))

    def has(self, lane: str) -> bool:
        return lane in self.loaded

    async def use(self, lane: str) -> Client:
        if lane not in self.loaded:
            raise RunAborted(f"no {lane} lane in this run")
        if lane == self.current and self._client is not None and not self.died():
            return self._client
        if self.died():
            # Going on would stop it as if it had lived: what it served since is suspect.
            assert self.process is not None
            raise RunAborted(
                f"the {self.current} server died; its logs are in {self.process.attempt.path}"
            )
        await self.stop()
        lc = self.loaded[lane]
        srv = lc.candidate.server
        if srv.attach and ServerProcess.picks_port(lc):
            raise RunAborted(
                f"{lc.path}: server.base_url names {{port}}, which only a launch fills; "
                "a server qualify attaches to needs its port written out"
            )
        base_url = srv.base_url if srv.attach else (await self._launch(lc, lane)).base_url
        self.current = lane
        self._client = Client(base_url, api_key(lc), timeout_s=srv.request_timeout_s)
        self._client.redactor = self.run.redactor
        return self._client

    async def _launch(self, lc: LoadedCandidate, lane: str) -> ServerProcess:
        """Start the lane's server and wait until healthy. A server on a picked port that lost
        it to another process before binding is launched again, on a fresh port."""
        for tries in range(1, BIND_TRIES + 1):
            attempt = self.run.new_attempt(f"server-{lane}")
            proc = ServerProcess(lc, attempt, lane)
            self.process = proc
            proc.start()
            try:
                took = await proc.wait_healthy()
            except BaseException as exc:
                proc.stop(keep_container=True)
                attempt.seal()
                self.process = None
                last = tries == BIND_TRIES or proc.port is None
                if last or not isinstance(exc, StartFailed) or not proc.bind_failed():
                    raise
                continue
            self.launches.append(
                Launched(lane=lane, attempt=attempt.number, healthy_after_s=took, port=proc.port)
            )
            return proc
        raise AssertionError("unreachable")

    def died(self) -> bool:
        """True when a server this run launched has exited on its own."""
        return self.process is not None and not self.process.alive()

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.process is not None:
            code = self.process.stop()
            self.process.attempt.write_json("exit.json", {"exit_code": code})
            self.process.attempt.seal()
            self.process = None
        self.current = None
