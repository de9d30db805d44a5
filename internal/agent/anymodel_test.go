package agent_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentwire/agentwire/internal/agent"
	"github.com/agentwire/agentwire/internal/event"
	"github.com/agentwire/agentwire/internal/leaktest"
	"github.com/agentwire/agentwire/internal/llm"
	"github.com/agentwire/agentwire/internal/llm/anthropic"
	"github.com/agentwire/agentwire/internal/llm/gemini"
	"github.com/agentwire/agentwire/internal/llm/llmtest"
	"github.com/agentwire/agentwire/internal/llm/openai"
)

// Every strategy and workflow must work with a model that answers as an
// ordinary chat model does: in prose, in JSON that does not parse, or in
// JSON of another shape than the one asked for. Each run ends in
// run.completed with a reply; the steps that got nothing usable say so
// in a system message.

// proseAnswer is what the plain models say to everything: no agent's
// name, no JSON.
const proseAnswer = "Looking at this, the notes say to remember the milk."

// Answers to a request for structure.
const (
	brokenJSON = `Sure: {"answer": "the notes say milk", "steps": [1, 2,`
	wrongJSON  = `{"answer": "the notes say milk", "confidence": 0.9}`
)

// plainModel answers every request with proseAnswer, and requests for
// structure with structured; it records the structures asked for.
type plainModel struct {
	structured string

	mu    sync.Mutex
	asked []string
}

func (m *plainModel) Name() string { return "plain" }

func (m *plainModel) Check(context.Context) error { return nil }

func (m *plainModel) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	text := proseAnswer
	if req.Structured != nil {
		m.mu.Lock()
		m.asked = append(m.asked, req.Structured.Name)
		m.mu.Unlock()
		text = m.structured
	}
	return func(yield func(llm.Chunk, error) bool) {
		_ = yield(llm.Chunk{Type: llm.ChunkText, Text: text}, nil) &&
			yield(llm.Chunk{Type: llm.ChunkUsage, Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10}}, nil) &&
			yield(llm.Chunk{Type: llm.ChunkFinish, Finish: llm.FinishStop}, nil)
	}
}

func (m *plainModel) structures() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(m.asked)))
}

// anyModelRuns are the strategies and workflows, and the structures each
// asks the model for.
var anyModelRuns = []struct {
	strategy string
	asks     []string
}{
	{"react", nil},
	{"dup", []string{"understanding"}},
	{"tot", []string{"candidates", "scores"}},
	{"got", []string{"plan"}},
	{"got_adaptive", []string{"assessment", "plan"}},
	{"group", []string{"next_speaker"}},
}

// runAny runs strategy (group: an auto-selected workflow of two rounds)
// with model m to its end, checks it completed with a reply and returns
// its events.
func runAny(t *testing.T, m llm.Model, strategy string) []event.Event {
	t.Helper()
	e := newEnv(t, "strategies")
	a := e.agent(agent.Config{Model: m})
	var evs []event.Event
	if strategy == "group" {
		evs = e.wait(e.startGroup(a, team(t, "speaker_selection: auto\nmax_rounds: 2"), "what do the notes say?", false, nil))
		checkIDs(t, evs)
		assert.Equal(t, []string{"planner/fallback", "coder/fallback"}, speakers(evs))
	} else {
		evs = e.runWith(a, strategy, "what do the notes say?")
	}
	out := outline(evs)
	require.Equal(t, "run.completed", strings.Fields(out[len(out)-1])[0], "%s ends: %q", strategy, out)
	assert.Contains(t, only[event.RunCompleted](t, evs).Reply, "remember the milk")
	return evs
}

func TestStrategiesWithPlainModels(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	for _, answer := range []struct{ name, structured string }{
		{"prose", proseAnswer},
		{"broken JSON", brokenJSON},
		{"wrong schema", wrongJSON},
	} {
		for _, tc := range anyModelRuns {
			t.Run(answer.name+"/"+tc.strategy, func(t *testing.T) {
				m := &plainModel{structured: answer.structured}
				evs := runAny(t, m, tc.strategy)
				assert.Equal(t, tc.asks, m.structures(), "the structures asked for")
				notes := systemNotes(evs)
				if tc.asks == nil {
					assert.Empty(t, notes)
					return
				}
				require.NotEmpty(t, notes, "people are told a step fell back")
				for _, n := range notes {
					assert.Regexp(t, `^The (model's|speaker selector's) answer .* even after a retry \(.+\), so .+\.$`, n)
				}
			})
		}
	}
}

// vendor is a provider on a fake API of its own, answering in its real
// stream format: prose, or for a request for structure what a model that
// does not follow the structure sends back.
type vendor struct {
	name string
	// answer answers one request.
	answer func(r llmtest.Request) llmtest.Reply
	model  func(t *testing.T, url string) llm.Model
	// asked returns the name of the structure body asks for in the
	// vendor's way, or "".
	asked func(t *testing.T, body map[string]any) string
}

var vendors = []vendor{
	{
		name:   "openai",
		answer: func(llmtest.Request) llmtest.Reply { return llmtest.OpenAIText(proseAnswer) },
		model:  openAIModel,
		asked:  openAIAsked,
	},
	{
		// An OpenAI-compatible server without structured outputs.
		name: "openai refusing response_format",
		answer: func(r llmtest.Request) llmtest.Reply {
			if strings.Contains(string(r.Body), `"response_format"`) {
				return llmtest.Reply{Status: http.StatusBadRequest,
					Body: `{"error":{"code":400,"message":"Unsupported param: response_format","type":"invalid_request_error"}}`}
			}
			return llmtest.OpenAIText(proseAnswer)
		},
		model: openAIModel,
		asked: openAIAsked,
	},
	{
		// A forced tool is called, with input of another shape.
		name: "anthropic",
		answer: func(r llmtest.Request) llmtest.Reply {
			var body struct {
				ToolChoice struct{ Name string } `json:"tool_choice"`
			}
			_ = json.Unmarshal(r.Body, &body)
			if name := body.ToolChoice.Name; name != "" {
				return llmtest.AnthropicText(`{"answer": "`+proseAnswer+`"}`, name)
			}
			return llmtest.AnthropicText(proseAnswer, "")
		},
		model: func(t *testing.T, url string) llm.Model {
			m, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "test", Model: "claude-test", MaxRetries: -1})
			require.NoError(t, err)
			return m
		},
		asked: func(t *testing.T, body map[string]any) string {
			choice, ok := body["tool_choice"].(map[string]any)
			if !ok {
				return ""
			}
			assert.Equal(t, "tool", choice["type"])
			name, _ := choice["name"].(string)
			assert.True(t, slices.ContainsFunc(body["tools"].([]any), func(tool any) bool {
				return tool.(map[string]any)["name"] == name && tool.(map[string]any)["input_schema"] != nil
			}), "the forced tool is on offer, with the structure as its input")
			return name
		},
	},
	{
		// JSON, of another shape.
		name: "gemini",
		answer: func(r llmtest.Request) llmtest.Reply {
			if strings.Contains(string(r.Body), `"responseMimeType":"application/json"`) {
				return llmtest.GeminiText(`{"answer": "` + proseAnswer + `"}`)
			}
			return llmtest.GeminiText(proseAnswer)
		},
		model: func(t *testing.T, url string) llm.Model {
			m, err := gemini.New(gemini.Config{BaseURL: url, APIKey: "test", Model: "gemini-test", MaxRetries: -1})
			require.NoError(t, err)
			return m
		},
		asked: func(t *testing.T, body map[string]any) string {
			gc, _ := body["generationConfig"].(map[string]any)
			if gc["responseMimeType"] != "application/json" {
				return ""
			}
			schema, ok := gc["responseSchema"].(map[string]any)
			require.True(t, ok, "responseSchema: %v", gc)
			assert.Equal(t, "OBJECT", schema["type"])
			props := slices.Sorted(func(yield func(string) bool) {
				for k := range schema["properties"].(map[string]any) {
					if !yield(k) {
						return
					}
				}
			})
			return strings.Join(props, ",") // the property names stand for the structure
		},
	},
}

func openAIModel(t *testing.T, url string) llm.Model {
	m, err := openai.New(openai.Config{BaseURL: url + "/v1", Model: "local-model", MaxRetries: -1})
	require.NoError(t, err)
	return m
}

func openAIAsked(t *testing.T, body map[string]any) string {
	rf, ok := body["response_format"].(map[string]any)
	if !ok {
		return ""
	}
	assert.Equal(t, "json_schema", rf["type"])
	js := rf["json_schema"].(map[string]any)
	assert.Equal(t, true, js["strict"], "our structures are strict")
	assert.NotNil(t, js["schema"])
	return js["name"].(string)
}

// structuredSteps are the instructions of the steps that ask for
// structure.
var structuredSteps = []string{"Strategy step: understand.", "Strategy step: expand.", "Strategy step: evaluate.",
	"Strategy step: plan graph.", "Strategy step: assess.", "choosing the next speaker"}

// Every strategy and workflow completes with a model that answers only
// prose, on each vendor's API in its real stream format; every step that
// wants structure asks for it the vendor's way (or, from a server that
// refuses response_format, in its instructions, after one refusal).
func TestStrategiesOnVendorAPIs(t *testing.T) {
	leaktest.Check(t, "agentwire/agentwire/internal")
	for _, v := range vendors {
		for _, tc := range anyModelRuns {
			t.Run(v.name+"/"+tc.strategy, func(t *testing.T) {
				srv := llmtest.NewServerFunc(t, v.answer)
				runAny(t, v.model(t, srv.URL), tc.strategy)

				refusing := strings.Contains(v.name, "refusing")
				asked, refusals := 0, 0
				for i, r := range srv.Requests() {
					body := r.JSON(t)
					raw := string(r.Body)
					wants := slices.ContainsFunc(structuredSteps, func(s string) bool { return strings.Contains(raw, s) })
					name := v.asked(t, body)
					switch {
					case !wants:
						assert.Empty(t, name, "request %d asks for structure", i)
					case refusing && name != "":
						refusals++
					case refusing:
						assert.Contains(t, raw, "Reply with only a JSON object that matches this JSON Schema", "request %d", i)
					default:
						assert.NotEmpty(t, name, "request %d: %s", i, raw)
					}
					if wants {
						asked++
					}
				}
				if tc.asks != nil {
					assert.NotZero(t, asked)
				}
				if refusing {
					assert.Equal(t, min(asked, 1), refusals, "the refusal is paid once")
				}
			})
		}
	}
}
