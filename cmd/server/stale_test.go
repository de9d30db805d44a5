package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonSocket is a WebSocket of any protocol, read as JSON objects by a
// goroutine of its own, so that a read can wait a while without ending the
// connection (a cancelled Read closes it).
type jsonSocket struct {
	t      *testing.T
	ws     *websocket.Conn
	frames chan map[string]any
	err    error // why frames was closed
}

func dialJSON(t *testing.T, url string) *jsonSocket {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), url, nil)
	require.NoError(t, err, "dial %s", url)
	ws.SetReadLimit(16 << 20)
	s := &jsonSocket{t: t, ws: ws, frames: make(chan map[string]any, 1024)}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(s.frames)
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				s.err = err
				return
			}
			var f map[string]any
			if err := json.Unmarshal(b, &f); err != nil {
				s.err = fmt.Errorf("%w: %s", err, b)
				return
			}
			s.frames <- f
		}
	})
	t.Cleanup(func() {
		_ = ws.CloseNow()
		wg.Wait()
	})
	return s
}

func (s *jsonSocket) send(frame any) {
	s.t.Helper()
	b, err := json.Marshal(frame)
	require.NoError(s.t, err)
	require.NoError(s.t, s.ws.Write(s.t.Context(), websocket.MessageText, b))
}

// until reads frames until stop says so, and returns every frame read,
// the last one stop's.
func (s *jsonSocket) until(stop func(map[string]any) bool) []map[string]any {
	s.t.Helper()
	timeout := time.After(30 * time.Second)
	var seen []map[string]any
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				// s.err is read only once the reader has closed frames:
				// before that it may still be writing it.
				s.t.Fatalf("the socket ended after %v: %v", types(seen), s.err)
			}
			seen = append(seen, f)
			if stop(f) {
				return seen
			}
		case <-timeout:
			s.t.Fatalf("no end after %v", types(seen))
		}
	}
}

// quiet returns what comes within d: what a socket is sent once nothing
// more should come.
func (s *jsonSocket) quiet(d time.Duration) []map[string]any {
	s.t.Helper()
	timeout := time.After(d)
	var seen []map[string]any
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				s.t.Fatalf("the socket ended after %v: %v", types(seen), s.err)
			}
			seen = append(seen, f)
		case <-timeout:
			return seen
		}
	}
}

func typed(typ string) func(map[string]any) bool {
	return func(f map[string]any) bool { return f["type"] == typ }
}

func types(frames []map[string]any) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i], _ = f["type"].(string)
		if ev, ok := f["event"].(map[string]any); ok {
			out[i] += "/" + ev["type"].(string)
		}
	}
	return out
}

// crashWhileWaiting starts a server on fresh folders, lets ask bring a run
// to wait for a person's answer, kills the server with SIGKILL, and starts
// it again on the same folders.
func crashWhileWaiting(t *testing.T, ask func(p *proc)) *proc {
	t.Helper()
	dir := t.TempDir()
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--workdir", filepath.Join(dir, "work"), "--shutdown-grace", "1s"}
	p := startProc(t, dir, args...)
	ask(p)
	p.kill()
	return startProc(t, dir, args...)
}

// TestInterruptedMeansOver kills the server while a run waits for an
// approval, an answer or a UI component, restarts it and rejoins the
// thread: the run is over (interrupted), nothing presents its request as
// still open, and an answer to it gets the protocol's "nothing pending"
// error. The threads API and agentchat ask nobody (their runs are refused
// what would need an answer), so they have no request to go stale.
func TestInterruptedMeansOver(t *testing.T) {
	t.Run("agentloop approval", func(t *testing.T) {
		var thread string
		p := crashWhileWaiting(t, func(p *proc) {
			s := dialAgentloop(t, p, "")
			first, _ := s.until("context_info")
			thread, _ = first.Payload["threadId"].(string)
			require.NotEmpty(t, thread)
			s.send(userInput("demo approval"))
			s.until("approval_request")
		})

		s := dialJSON(t, "ws://"+p.addr+"/agentloop?thread_id="+thread)
		seen := s.until(typed("context_info"))
		seen = append(seen, s.quiet(time.Second)...)
		ended := -1
		for i, f := range seen {
			if f["type"] == "error" {
				ended = i
			}
		}
		require.NotEqual(t, -1, ended, "the rejoin shows the interrupted turn's error: %v", types(seen))
		for _, f := range seen[ended:] {
			assert.NotEqual(t, "approval_request", f["type"], "a request of the interrupted run is sent after its end: %v", types(seen))
		}
		s.send(json.RawMessage(review("yes")))
		got := s.until(typed("error"))
		assert.Contains(t, got[len(got)-1]["payload"].(map[string]any)["message"], "No approval request is pending")
	})

	for _, tc := range []struct {
		name, prompt string
		answer       func(request map[string]any) any
	}{
		{"ag2 approval", "demo approval", func(r map[string]any) any {
			return map[string]any{"type": "user.input.submit", "request_id": ag2Field(r, "request_id"), "text": "approve"}
		}},
		{"ag2 input", "demo input", func(r map[string]any) any {
			return map[string]any{"type": "user.input.submit", "request_id": ag2Field(r, "request_id"), "text": "Ada"}
		}},
		{"ag2 ui tool", "demo ui", func(r map[string]any) any {
			return map[string]any{"type": "inline_component.result", "corr": ag2Field(r, "corr"), "data": map[string]any{"choice": "red"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := ""
			var request map[string]any
			p := crashWhileWaiting(t, func(p *proc) {
				url = "/ws/default/acme/" + uuid.NewString() + "/alice"
				s := dialJSON(t, "ws://"+p.addr+url)
				s.send(map[string]any{"type": "user.input.submit", "text": tc.prompt})
				seen := s.until(func(f map[string]any) bool {
					return f["type"] == "chat.input_request" || f["type"] == "chat.tool_call" && ag2Field(f, "awaiting_response") == true
				})
				request = seen[len(seen)-1]
			})

			// A client that saw the request resumes after it: the run's end
			// comes, and the request does not. (The server's first resume
			// of a socket replays the transcript, the frames the client
			// holds first: it drops those, as it kept them on screen.)
			s := dialJSON(t, "ws://"+p.addr+url)
			s.send(map[string]any{"type": "client.resume", "lastClientIndex": ag2Field(request, "seq")})
			var seen []map[string]any
			for _, f := range append(s.until(typed("chat.resume_boundary")), s.quiet(time.Second)...) {
				if at, _ := ag2Field(f, "seq").(float64); f["replay"] != true || at > ag2Field(request, "seq").(float64) {
					seen = append(seen, f)
				}
			}
			assert.Contains(t, types(seen), "chat.run_complete", "the resumed chat shows the run's end")
			for _, f := range seen {
				assert.NotEqual(t, request["type"], f["type"], "the request is sent again: %v", types(seen))
			}

			// A client that replays everything gets the request's event
			// where it was, before the run's end, and never after it; the
			// transcript does not ask it again (no chat.input_request, a
			// component that awaits nothing).
			all := dialJSON(t, "ws://"+p.addr+url)
			all.send(map[string]any{"type": "client.resume", "lastClientIndex": 0})
			replay := all.until(typed("chat.resume_boundary"))
			replay = append(replay, all.quiet(time.Second)...)
			asked, ended := -1, -1
			for i, f := range replay {
				assert.False(t, f["type"] == "chat.input_request" || f["type"] == "ui_tool_event" || ag2Field(f, "awaiting_response") == true,
					"the ended run's request is asked again: %v", f)
				switch {
				case ag2Field(f, "seq") == ag2Field(request, "seq"):
					asked = i
				case f["type"] == "chat.run_complete":
					ended = i
				}
			}
			require.NotEqual(t, -1, asked, "the replay holds the request: %v", types(replay))
			require.Greater(t, ended, asked, "the run's end follows its request: %v", types(replay))
			if request["type"] == "chat.tool_call" {
				for _, f := range replay[ended:] {
					assert.False(t, f["type"] == "chat.tool_call" && ag2Field(f, "awaiting_response") == true,
						"a component awaits an answer after its run's end: %v", types(replay))
				}
			}

			s.send(tc.answer(request))
			got := s.until(typed("chat.error"))
			assert.Equal(t, "UNKNOWN_REQUEST", ag2Field(got[len(got)-1], "error_code"), "%v", got[len(got)-1])
		})
	}

	t.Run("loom approval", func(t *testing.T) {
		var run, thread, call string
		p := crashWhileWaiting(t, func(p *proc) {
			s := dialJSON(t, "ws://"+p.addr+"/loom")
			run = uuid.NewString()
			s.send(map[string]any{"type": "run", "id": run, "message": "demo approval", "agent": "react"})
			seen := s.until(func(f map[string]any) bool {
				ev, _ := f["event"].(map[string]any)
				return ev != nil && ev["type"] == "tool_approval"
			})
			ev := seen[len(seen)-1]["event"].(map[string]any)
			call, _ = ev["call_id"].(string)
			thread, _ = ev["session_id"].(string)
			require.NotEmpty(t, call)
			require.NotEmpty(t, thread)
		})

		s := dialJSON(t, "ws://"+p.addr+"/loom")
		s.send(map[string]any{"type": "tool_approval_response", "id": run, "thread_id": thread, "call_id": call, "decision": "approve"})
		got := s.until(typed("error"))
		assert.NotEmpty(t, got[len(got)-1]["error"])

		// The next run on the thread is asked nothing of the last one's.
		next := uuid.NewString()
		s.send(map[string]any{"type": "run", "id": next, "thread_id": thread, "message": "hello", "agent": "react"})
		seen := s.until(typed("run_end"))
		for _, f := range seen {
			ev, _ := f["event"].(map[string]any)
			assert.False(t, ev != nil && ev["type"] == "tool_approval", "a request of the interrupted run: %v", types(seen))
		}
	})
}

// ag2Field reads a field of an AG2 frame, under data or at its top level.
func ag2Field(f map[string]any, name string) any {
	if d, ok := f["data"].(map[string]any); ok {
		if v, ok := d[name]; ok {
			return v
		}
	}
	return f[name]
}
