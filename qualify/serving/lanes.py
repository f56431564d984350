"""Lanes: the candidate's server and the control's, never both running at once."""

from __future__ import annotations

import os

from qualify.candidate import LoadedCandidate
from qualify.errors import BadInput, RunAborted
from qualify.evidence.store import RunDir
from qualify.httpclient.client import Client
from qualify.serving.process import ServerProcess


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


class Lanes:
    """Starts, switches and stops the servers of the candidate and its control."""

    def __init__(self, run: RunDir, lanes: dict[str, LoadedCandidate]) -> None:
        self.run = run
        self.loaded = lanes
        self.current: str | None = None
        self.process: ServerProcess | None = None
        self._client: Client | None = None
        self.launches: list[dict[str, object]] = []
        for lc in lanes.values():
            run.redactor.add(api_key(lc))

    def has(self, lane: str) -> bool:
        return lane in self.loaded

    async def use(self, lane: str) -> Client:
        if lane not in self.loaded:
            raise RunAborted(f"no {lane} lane in this run")
        if lane == self.current and self._client is not None:
            if self.process is None or self.process.alive():
                return self._client
            raise RunAborted(f"the {lane} server died; its logs are in {self.process.attempt.path}")
        await self.stop()
        lc = self.loaded[lane]
        srv = lc.candidate.server
        if not srv.attach:
            attempt = self.run.new_attempt(f"server-{lane}")
            proc = ServerProcess(lc, attempt, lane)
            self.process = proc
            proc.start()
            try:
                took = await proc.wait_healthy()
            except BaseException:
                proc.stop(keep_container=True)
                attempt.seal()
                self.process = None
                raise
            self.launches.append({"lane": lane, "attempt": attempt.number, "healthy_after_s": took})
        self.current = lane
        self._client = Client(srv.base_url, api_key(lc), timeout_s=srv.request_timeout_s)
        self._client.redactor = self.run.redactor
        return self._client

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
