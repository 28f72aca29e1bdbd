// A trivial OpenAI-style SSE server for measuring the *client*: it answers every POST with
// CHUNKS content chunks, a usage chunk and [DONE], as fast as Node can write them.
// Usage: node sse_server.js PORT [CHUNKS] [DELAY_MS]
// DELAY_MS > 0 waits that long before the first chunk (to measure TTFT error against a known
// server-side delay). With SSE_LOG=1 it prints "request" on stdout as each POST arrives (tests
// use that to know requests are in flight); with SSE_LOG=2 it prints, for each response, the
// CLOCK_MONOTONIC nanoseconds (process.hrtime, the clock Python's time.monotonic reads) just
// before the body is written, so a client can measure its own TTFT error. Bound to 127.0.0.1.
"use strict";
const http = require("http");
const port = parseInt(process.argv[2] || "0", 10);
const chunks = parseInt(process.argv[3] || "16", 10);
const delayMs = parseFloat(process.argv[4] || "0");
const pieces = [];
// The fields a strict OpenAI client (AIPerf) expects on every chunk.
const head = { id: "chatcmpl-node", object: "chat.completion.chunk", created: 1700000000, model: "node-sse" };
for (let i = 0; i < chunks; i++) {
  const finish = i === chunks - 1 ? "length" : null;
  pieces.push("data: " + JSON.stringify({ ...head, choices: [{ index: 0, delta: { role: "assistant", content: "tok" + i + " " }, finish_reason: finish }] }) + "\n\n");
}
const usage = { prompt_tokens: 8, completion_tokens: chunks, total_tokens: 8 + chunks };
const tail = "data: " + JSON.stringify({ ...head, choices: [], usage }) + "\n\ndata: [DONE]\n\n";
const body = pieces.join("") + tail;
const server = http.createServer((req, res) => {
  if (req.method === "GET") {
    if (req.url === "/v1/models") {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "node-sse" }] }));
    } else {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok");
    }
    return;
  }
  if (process.env.SSE_LOG === "1") process.stdout.write("request\n");
  let received = 0;
  req.on("data", (c) => { received += c.length; });
  req.on("end", () => {
    if (req.url === "/upload") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end(String(received));
      return;
    }
    const send = () => {
      res.writeHead(200, { "Content-Type": "text/event-stream" });
      if (process.env.SSE_LOG === "2") process.stdout.write(process.hrtime.bigint().toString() + "\n");
      res.end(body);
    };
    if (delayMs > 0) setTimeout(send, delayMs); else send();
  });
});
server.keepAliveTimeout = 60000;
server.listen(port, "127.0.0.1", () => {
  process.stdout.write(String(server.address().port) + "\n");
});
