// The typed clients, one per protocol (see the package's README).

export { type ConnectOptions, type Closed, type Frame, type FrameOf, Socket, endpoint, subprotocols } from "./socket.js";
export { AgentChatClient, type AgentChatOptions } from "./agentchat.js";
export { AgentLoopClient, type AgentLoopOptions, type Review } from "./agentloop.js";
export { Ag2Client, type Ag2Options } from "./ag2.js";
export { LoomClient, type RunEvent, type RunOptions } from "./loom.js";
export { ThreadsClient, ThreadsError, parseSSE, type RawEvent, type ThreadsOptions } from "./threads.js";
