package threads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/ogen-go/ogen/ogenerrors"

	"github.com/agentwire/agentwire/generated/threadsapi"
	"github.com/agentwire/agentwire/internal/sse"
)

// Client talks to a threads server: it reads histories through the
// generated ogen client and opens typed event streams.
//
// The streams do not use the generated client's SSE operations. ogen
// v1.24.0's generated streams reconnect on their own by sending the same
// request again, which for POST /api/v1/threads/{threadId} would post the
// user's message twice, and they reconnect even after a POST stream has
// ended normally. Client builds the two stream requests itself with the same
// generated types and leaves resuming to the caller: Stream.LastEventID and
// Client.Resume.
type Client struct {
	api  *threadsapi.Client
	base *url.URL
	http *http.Client
}

// Bearer is a credential for the generated client (threadsapi.SecuritySource):
// an API key or a JWT sent as `Authorization: Bearer`. The empty Bearer
// sends none, for a server that runs with --auth none.
type Bearer string

// BearerAuth implements threadsapi.SecuritySource.
func (b Bearer) BearerAuth(context.Context, threadsapi.OperationName) (threadsapi.BearerAuth, error) {
	if b == "" {
		return threadsapi.BearerAuth{}, ogenerrors.ErrSkipClientSecurity
	}
	return threadsapi.BearerAuth{Token: string(b)}, nil
}

// NewClient returns a Client for the server at baseURL (for example
// "http://127.0.0.1:8080"). A nil httpClient means http.DefaultClient; it
// must not time out whole requests, or it cuts streams short.
func NewClient(baseURL string, httpClient *http.Client) (*Client, error) {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("threads: base URL: %w", err)
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("threads: base URL %q: scheme must be http or https", baseURL)
	}
	// Credentials, when the server wants them, are httpClient's to add
	// (its Transport), so that the hand-written stream requests carry
	// them too.
	api, err := threadsapi.NewClient(baseURL, Bearer(""), threadsapi.WithClient(httpClient))
	if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	base.Path = strings.TrimRight(base.Path, "/")
	return &Client{api: api, base: base, http: httpClient}, nil
}

// APIError is a 4xx or 5xx answer, with the message of its {"error": ...}
// body.
type APIError struct {
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("threads: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// History returns the thread's history. A thread that does not exist is an
// *APIError with StatusCode 404.
func (c *Client) History(ctx context.Context, threadID uuid.UUID) (*threadsapi.ThreadResponse, error) {
	res, err := c.api.GetThread(ctx, threadsapi.GetThreadParams{ThreadID: threadID})
	if err != nil {
		return nil, fmt.Errorf("threads: history: %w", err)
	}
	switch r := res.(type) {
	case *threadsapi.ThreadResponse:
		return r, nil
	case *threadsapi.GetThreadBadRequest:
		return nil, &APIError{StatusCode: http.StatusBadRequest, Message: r.Error}
	case *threadsapi.GetThreadNotFound:
		return nil, &APIError{StatusCode: http.StatusNotFound, Message: r.Error}
	case *threadsapi.GetThreadInternalServerError:
		return nil, &APIError{StatusCode: http.StatusInternalServerError, Message: r.Error}
	}
	return nil, fmt.Errorf("threads: history: unexpected answer %T", res)
}

// SendMessage posts text to the thread (creating it when it does not exist)
// and returns the stream of the run it starts. The stream ends after its
// done or error event. If it breaks before that, resume it with
// Resume(ctx, threadID, stream.LastEventID()); never send the message again.
//
// ctx bounds the request and the whole stream.
func (c *Client) SendMessage(ctx context.Context, threadID uuid.UUID, text string) (*Stream, error) {
	body, err := encodeChecked(&threadsapi.SendMessageRequest{Text: text}, threadsapi.ValidateSendMessageRequestJSON)
	if err != nil {
		return nil, fmt.Errorf("threads: send message: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.threadURL(threadID, ""), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("threads: send message: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.open(req, true)
}

// Resume opens the thread's event stream after the event whose id is
// lastEventID ("" for the start of the thread), then live. Unlike a
// SendMessage stream it does not end at done: it follows the thread until
// ctx is done or the server closes it (Next then returns io.EOF; resume
// again from LastEventID).
func (c *Client) Resume(ctx context.Context, threadID uuid.UUID, lastEventID string) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.threadURL(threadID, "/events"), nil)
	if err != nil {
		return nil, fmt.Errorf("threads: resume: %w", err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	s, err := c.open(req, false)
	if err != nil {
		return nil, err
	}
	// As an EventSource does, the stream's position is the one it resumed
	// from until an event moves it.
	s.r.SetLastEventID(lastEventID)
	return s, nil
}

func (c *Client) threadURL(threadID uuid.UUID, suffix string) string {
	u := *c.base
	u.Path += "/api/v1/threads/" + threadID.String() + suffix
	u.RawPath = ""
	return u.String()
}

// open sends a stream request and checks the answer.
func (c *Client) open(req *http.Request, endsAtDone bool) (*Stream, error) {
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("threads: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, errorAnswer(resp)
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("threads: %s %s: Content-Type %q, want text/event-stream", req.Method, req.URL.Path, resp.Header.Get("Content-Type"))
	}
	return &Stream{body: resp.Body, r: sse.NewReaderSize(resp.Body, MaxBodyBytes), endsAtDone: endsAtDone}, nil
}

// errorAnswer turns a non-200 answer into an *APIError, with the body's
// message when it is the documented {"error": ...} object.
func errorAnswer(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("threads: %s: reading the error body: %w", resp.Status, err)
	}
	e, err := DecodeError(body)
	if err != nil {
		return &APIError{StatusCode: resp.StatusCode, Message: fmt.Sprintf("undocumented error body (%v)", err)}
	}
	return &APIError{StatusCode: resp.StatusCode, Message: e.Error}
}

// ErrIncomplete is returned by a SendMessage stream that ends before its
// done or error event: resume it from Stream.LastEventID.
var ErrIncomplete = errors.New("threads: stream ended before done or error")

// Stream is an open thread stream. It is not safe for concurrent use; Close
// it when done with it.
type Stream struct {
	body       io.ReadCloser
	r          *sse.Reader
	endsAtDone bool
	ended      bool
}

// Next returns the stream's next event, skipping heartbeats and events whose
// name the document does not define. At the end of the stream it returns
// io.EOF: after done or error for a SendMessage stream (ErrIncomplete if the
// connection ends first), when the server closes a Resume stream. An event
// whose data does not match its schema is returned as an error wrapping a
// *wire.Error; Next may be called again to read on. If ctx is done, Next
// closes the stream and returns ctx's error.
func (s *Stream) Next(ctx context.Context) (threadsapi.StreamEvent, error) {
	if s.ended {
		return threadsapi.StreamEvent{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		// Done already: an event the reader holds is not returned either.
		s.body.Close()
		return threadsapi.StreamEvent{}, err
	}
	stop := context.AfterFunc(ctx, func() { s.body.Close() })
	defer stop()
	for {
		raw, err := s.r.Next()
		if err != nil {
			if ctx.Err() != nil {
				return threadsapi.StreamEvent{}, ctx.Err()
			}
			if errors.Is(err, io.EOF) && s.endsAtDone {
				return threadsapi.StreamEvent{}, ErrIncomplete
			}
			return threadsapi.StreamEvent{}, err
		}
		e, err := DecodeEvent(raw)
		if err != nil {
			if !knownEvent(raw.Type) {
				continue // an event a later version added
			}
			return threadsapi.StreamEvent{}, fmt.Errorf("threads: %s event %q: %w", raw.Type, raw.ID, err)
		}
		if s.endsAtDone && (e.Type == threadsapi.DoneSSEStreamEvent || e.Type == threadsapi.ErrorSSEStreamEvent) {
			s.ended = true
			s.body.Close()
		}
		return e, nil
	}
}

// LastEventID returns the id of the last event read, to resume from.
func (s *Stream) LastEventID() string { return s.r.LastEventID() }

// Close closes the stream.
func (s *Stream) Close() error { return s.body.Close() }
