package ag2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentwire/agentwire/generated/ag2api"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/logs"
	"github.com/agentwire/agentwire/internal/protocol"
	"github.com/agentwire/agentwire/internal/protocol/wsconn"
)

// session is one socket.
type session struct {
	log                 logs.Lazy // the handler's, with the connection's id
	h                   *Handler
	c                   *wsconn.Conn
	chat                string
	workflow, ent, user string
	limiter             *rate.Limiter
	proj                *projector
	frames              *protocol.ThreadFrames[frameKey, encoded] // what the chat's sockets share
	resume              chan int64                                // client.resume's lastClientIndex, to the follow goroutine
	started             chan struct{}                             // closed at the client's first message other than client.resume
	history             chan struct{}                             // closed once proj has the chat's events up to when the socket opened (or the follow ended)
	opened              int64                                     // the chat's last seq when the upgrade was answered; -1 when not known
	start               sync.Once
	ag2api.UnimplementedHandler
}

var _ ag2api.Handler = (*session)(nil)

// check checks the workflow and the chat's scope; false means the
// socket is refused (check has sent and closed what says why).
func (s *session) check(ctx context.Context) bool {
	if err := s.h.workflows(s.workflow); err != nil {
		code, msg, reason := codeNoWorkflow, fmt.Sprintf("Workflow %q not found", s.workflow), "workflow not found"
		details := map[string]any{"workflow": s.workflow}
		if s.h.names != nil {
			details["available"] = s.h.names()
		}
		if !errors.Is(err, errNoWorkflow) {
			code, msg, reason = codeAgentInit, fmt.Sprintf("Workflow %q could not be loaded: %v", s.workflow, err), "workflow does not load"
		}
		s.send(frame{msg: chatError(s.chat, 0, code, msg, details, false)}, false)
		s.c.Refuse(reason, true)
		return false
	}
	if err := s.h.checkScope(ctx, s.chat, s.ent, s.user); err != nil {
		if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound || perr.Code == protocol.CodeForbidden {
			s.c.Refuse("the chat belongs to another enterprise or user", false)
			return false
		}
		s.sendErr(err, "open the chat")
		s.c.Fail("the chat could not be opened")
		return false
	}
	return true
}

// serve checks the workflow and the chat's scope, follows the chat, and
// reads the client's frames until the socket ends. The checks read the
// store aside (protocol.Aside), so that the socket's goroutine, which
// lives as long as it, keeps a small stack.
func (s *session) serve(ctx context.Context) error {
	ok := false
	protocol.Aside(func() { ok = s.check(ctx) })
	if !ok {
		return nil
	}
	return protocol.Session{Open: s.open, Handle: s.handle, ShuttingDown: func() {
		s.send(frame{msg: chatError(s.chat, 0, codeTransport, "The server is shutting down; reconnect shortly", nil, false)}, false)
	}}.Serve(ctx, s.c, &s.h.streams)
}

// open follows the chat, and returns the follow (nil when the chat
// cannot be followed).
func (s *session) open(ctx context.Context) func(context.Context) {
	f, err := protocol.Follow(ctx, s.h.core, s.chat, 0)
	if err != nil {
		if perr := protocol.AsError(err); perr.Code == protocol.CodeNotFound {
			s.c.Refuse("the chat belongs to someone else", false)
			return nil
		}
		s.sendErr(err, "follow the chat")
		s.c.Fail("the chat could not be followed")
		return nil
	}
	s.frames = s.h.frames.Join(s.chat)
	return func(ctx context.Context) {
		defer s.h.frames.Leave(s.frames)
		defer f.Close()
		s.follow(ctx, f)
	}
}

// holdLive is how long a new socket holds the chat's live frames while it
// waits for the client's first message: a client that reconnects sends
// client.resume first, and the frames held meanwhile are then part of
// its replay instead of arriving before it (out of seq order, or twice).
const holdLive = 500 * time.Millisecond

// follow projects the chat's events and sends the live ones, and serves
// client.resume between events, so a replay and the live frames after it
// meet with no gap and no duplicate. The events up to the chat's end when
// the socket opened are projected (the projector needs them) but sent
// only when a client.resume asks for them. Live frames are held until the
// client's first message or holdLive (see holdLive).
func (s *session) follow(ctx context.Context, f *protocol.Follower) {
	head := f.Head()
	if s.opened >= 0 {
		head = min(head, s.opened)
	}
	var last int64
	scoped := false // the chat's scope was checked since it had events
	holding, held := true, []frame(nil)
	// The hold runs from when the chat's history is projected (a resume
	// can be served from then on), not from when the socket opened: a
	// long history projected on a busy machine must not use it up.
	var hold *time.Timer
	var holdC <-chan time.Time
	caughtUp := sync.OnceFunc(func() { close(s.history) })
	defer caughtUp() // a follow that ends lets a waiting message go
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	// live is whether a frame of the chat's stream has been sent live on
	// this socket, and resumed whether a resume was served: until either,
	// a resume may come from a client that shows nothing of the chat yet
	// (ChatUI after a reload), and gets the transcript unless
	// --ag2-resume=after-seq (replay).
	live, resumed := false, false
	release := func() {
		if holding {
			holding = false
			for _, fr := range held {
				s.send(fr, false)
				live = live || fr.seq > 0
			}
			held = nil
		}
	}
	serve := func(n int64) {
		holding, held = false, nil
		s.replay(ctx, n, last, !s.h.afterSeq && !live && !resumed)
		resumed = true
	}
	for {
		// A resume waits until the history up to head is projected, so it
		// replays all of it.
		var resume chan int64
		if last >= head {
			caughtUp()
			resume = s.resume
			if hold == nil {
				hold = time.NewTimer(holdLive)
				holdC = hold.C
			}
		}
		started := s.started
		if !holding {
			started = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-holdC:
			// A resume that came meanwhile goes first: the frames held
			// are in its replay.
			select {
			case n := <-resume:
				serve(n)
			default:
				release()
			}
		case <-started:
			release()
		case n := <-resume:
			// The frames held are in the replay.
			serve(n)
		case <-f.Ready():
			// Between events, so that a resume above meets the live
			// frames with no gap and no duplicate.
			for {
				e, ok, err := f.Next()
				if err != nil && ctx.Err() == nil && protocol.AsError(err).Code == protocol.CodeNotFound {
					// Nobody's chat when the socket opened, and another
					// principal's now: the refusal is the close alone.
					s.c.Refuse("the chat belongs to someone else", false)
					return
				}
				if err != nil {
					if ctx.Err() == nil {
						s.log.L().Error("ag2: following the chat failed", "chat", s.chat, "err", err)
						s.send(frame{msg: chatError(s.chat, 0, codeTransport, "The chat's events stopped; reconnect and resume", nil, false)}, false)
						s.c.Fail("the chat's events stopped")
					}
					return
				}
				if !ok {
					break
				}
				if e.Preview != 0 {
					continue
				}
				if !scoped {
					// The chat may have been nobody's when the socket
					// opened: its first event says whose it is now.
					if err := s.h.checkScope(ctx, s.chat, s.ent, s.user); err != nil {
						s.c.Refuse("the chat belongs to another enterprise or user", false)
						return
					}
					scoped = true
				}
				last = e.Seq
				frames := s.proj.Project(e)
				if e.Seq <= head {
					continue
				}
				s.keyFrames(e, frames)
				if holding {
					held = append(held, frames...)
					continue
				}
				for _, fr := range frames {
					s.send(fr, false)
					live = live || fr.seq > 0
				}
			}
		}
	}
}

// projected waits until the socket's projector has the chat's events up
// to when the socket opened, which the client's messages are answered
// against: a client that sends text the moment its socket opens, after a
// turn whose approval was answered, must not find that approval still
// pending in a projector halfway through the history (its text would be
// taken for an answer to it).
func (s *session) projected(ctx context.Context) error {
	select {
	case <-s.history:
		return nil
	default:
	}
	if s.h.waitingForHistory != nil {
		s.h.waitingForHistory()
	}
	select {
	case <-s.history:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keyFrames gives the live frames of e their keys (frameKey).
func (s *session) keyFrames(e event.Event, frames []frame) {
	if e.ID == "" {
		return // not from the log: nothing names it
	}
	for i := range frames {
		frames[i].key = frameKey{event: e.ID, part: i, workflow: s.workflow}
	}
}

// replay sends the frames of the chat's events up to seq upto (the last
// event this socket has projected), marked replay:true, then
// chat.resume_boundary. It projects the chat from its first event with a
// projector of its own, and coalesces the contiguous chat.print deltas of
// one message into one frame.
//
// Without transcript it sends the frames of the events after seq after
// (the document's reading of client.resume). With transcript it sends the
// chat from its start (what ChatUI needs to show the conversation again
// after a reload): the frames up to after, then those after it, each part
// coalesced on its own, so that a client that kept what it showed drops
// the replayed frames whose seq is at most after and is left with exactly
// the other reading's frames. A transcript asks no answered request
// again: transcriptFrames leaves out the requests and components of the
// requests no longer pending.
func (s *session) replay(ctx context.Context, after, upto int64, transcript bool) {
	p := newProjector(s.chat, s.h.prices, s.h.model).inWorkflow(s.workflow).replaying()
	var before, out []frame
	for seq := int64(0); seq < upto; {
		evs, err := s.h.core.Read(ctx, s.chat, seq, readPage)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.L().Warn("ag2: replay", "chat", s.chat, "err", err)
			s.send(frame{msg: chatError(s.chat, 0, codeResume, "The chat could not be replayed; reconnect and resume again",
				map[string]any{"lastClientIndex": after}, true)}, false)
			return
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			if e.Seq > upto {
				break
			}
			seq = e.Seq
			frames := p.Project(e)
			for i, fr := range frames {
				// A replayed chat.error carries the seq of the event it
				// reports too, so that every replayed frame says which side
				// of lastClientIndex it is on.
				if m, ok := fr.msg.(ag2api.ChatError); ok && m.Data.Seq == nil {
					m.Data.Seq = new(int(e.Seq))
					frames[i].msg = m
				}
			}
			if e.Seq > after {
				out = append(out, frames...)
			} else {
				before = append(before, frames...)
			}
		}
	}
	total := 0
	for _, fr := range coalesce(append(append([]frame(nil), before...), out...)) {
		if fr.seq > 0 {
			total++
		}
	}
	send := coalesce(out)
	if transcript {
		send = p.transcriptFrames(append(coalesce(before), send...))
	}
	replayed, lastIndex := 0, 0
	for _, fr := range send {
		if fr.seq > 0 {
			replayed++
			lastIndex = int(fr.seq)
		}
		s.send(fr, true)
	}
	s.send(frame{at: time.Now().UTC(), msg: ag2api.NewResumeBoundary(ag2api.ResumeBoundaryData{ChatID: s.chat,
		ReplayedMessages: new(replayed), LastMessageIndex: new(lastIndex), TotalMessages: new(total)})}, false)
}

// coalesce merges each run of contiguous chat.print frames of one message
// into one, with the seq of the last.
func coalesce(frames []frame) []frame {
	var out []frame
	for _, fr := range frames {
		if p, ok := fr.msg.(ag2api.Print); ok && len(out) > 0 {
			if prev, ok := out[len(out)-1].msg.(ag2api.Print); ok && prev.Data.Corr != nil && p.Data.Corr != nil && *prev.Data.Corr == *p.Data.Corr {
				prev.Data.Content += p.Data.Content
				prev.Data.Seq = p.Data.Seq
				out[len(out)-1] = frame{seq: fr.seq, at: fr.at, msg: prev}
				continue
			}
		}
		out = append(out, fr)
	}
	return out
}

// send encodes fr and queues it; replayed frames carry replay:true. A
// live frame with a key is encoded once for every socket of the chat
// (frameKey).
func (s *session) send(fr frame, replayed bool) {
	var w encoded
	var ok bool
	if replayed || fr.key == (frameKey{}) {
		w, ok = s.encode(fr, replayed)
	} else {
		w, ok = s.frames.Frame(fr.key, func() (encoded, bool) { return s.encode(fr, false) })
	}
	if !ok {
		return
	}
	s.c.Send(w.b)
	if w.old != nil {
		s.c.Send(w.old)
	}
}

// encoded is a frame as sent: its bytes, and with --ag2-legacy-types the
// same frame with the type's old name, sent after it.
type encoded struct{ b, old []byte }

// encode encodes fr (and has it verified); ok false when it cannot be
// encoded, which is logged.
func (s *session) encode(fr frame, replayed bool) (encoded, bool) {
	b, err := ag2api.Encode(fr.msg)
	if err != nil {
		s.log.L().Error("ag2: encode a frame", "type", fr.msg.MessageType(), "err", err)
		return encoded{}, false
	}
	at := fr.at
	if at.IsZero() {
		at = time.Now()
	}
	w := encoded{b: envelope(flatten(b), at, replayed)}
	if s.h.verify != nil {
		s.h.verify(w.b)
	}
	if s.h.legacy {
		if t := fr.msg.MessageType(); strings.HasPrefix(t, "chat.") {
			old, _ := json.Marshal(strings.TrimPrefix(t, "chat."))
			w.old = bytes.Replace(w.b, []byte(`"type":"`+t+`"`), append([]byte(`"type":`), old...), 1)
		}
	}
	return w, true
}

// envelope adds timestamp (and replay) to an encoded frame.
func envelope(b []byte, at time.Time, replayed bool) []byte {
	b = bytes.TrimRight(b, " \n")
	extra := `,"timestamp":"` + at.UTC().Format(time.RFC3339Nano) + `"`
	if replayed {
		extra += `,"replay":true`
	}
	out := make([]byte, 0, len(b)+len(extra))
	out = append(out, b[:len(b)-1]...)
	out = append(out, extra...)
	return append(out, '}')
}
