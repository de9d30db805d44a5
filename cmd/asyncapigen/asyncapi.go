package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Direction says who sends a message.
type Direction int

// Directions, from the server's point of view.
const (
	Inbound  Direction = iota + 1 // client to server (operation action "receive")
	Outbound                      // server to client (operation action "send")
)

// Message is one message of the protocol.
type Message struct {
	Key       string // the component key, e.g. "UserInput"
	Name      string // the message name
	Summary   string
	Direction Direction
	Payload   *Schema
	WireType  string // the const of the payload's "type" property
}

// API is what the generator needs from an AsyncAPI document.
type API struct {
	Title       string
	Description string
	Address     string
	Messages    []*Message // inbound first, then outbound, each in operation order
}

type asyncDoc struct {
	AsyncAPI string `yaml:"asyncapi"`
	Info     struct {
		Title       string `yaml:"title"`
		Description string `yaml:"description"`
	} `yaml:"info"`
	Channels map[string]struct {
		Address  string               `yaml:"address"`
		Messages map[string]refHolder `yaml:"messages"`
	} `yaml:"channels"`
	Operations yaml.Node `yaml:"operations"`
	Components struct {
		Messages map[string]struct {
			Name    string    `yaml:"name"`
			Summary string    `yaml:"summary"`
			Payload refHolder `yaml:"payload"`
		} `yaml:"messages"`
	} `yaml:"components"`
}

type refHolder struct {
	Ref string `yaml:"$ref"`
}

type operation struct {
	Action   string      `yaml:"action"`
	Channel  refHolder   `yaml:"channel"`
	Messages []refHolder `yaml:"messages"`
}

// loadAPI reads the AsyncAPI document at path and every schema it uses.
func loadAPI(path string, l *loader) (*API, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc asyncDoc
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.") {
		return nil, fmt.Errorf("%s: asyncapi %q: only 3.x documents are supported", path, doc.AsyncAPI)
	}
	if len(doc.Channels) != 1 {
		return nil, fmt.Errorf("%s: expected exactly one channel, found %d", path, len(doc.Channels))
	}
	api := &API{Title: doc.Info.Title, Description: doc.Info.Description}
	var channelKey string
	for k, ch := range doc.Channels {
		channelKey, api.Address = k, ch.Address
	}
	channel := doc.Channels[channelKey]

	// Operations in document order, so generated code follows the document.
	if doc.Operations.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: operations must be an object", path)
	}
	seen := map[string]bool{}
	var inbound, outbound []*Message
	for i := 0; i < len(doc.Operations.Content); i += 2 {
		opName := doc.Operations.Content[i].Value
		var op operation
		if err := doc.Operations.Content[i+1].Decode(&op); err != nil {
			return nil, fmt.Errorf("%s: operation %s: %w", path, opName, err)
		}
		if op.Channel.Ref != "#/channels/"+channelKey {
			return nil, fmt.Errorf("%s: operation %s: channel %q is not #/channels/%s", path, opName, op.Channel.Ref, channelKey)
		}
		var dir Direction
		switch op.Action {
		case "receive":
			dir = Inbound
		case "send":
			dir = Outbound
		default:
			return nil, fmt.Errorf("%s: operation %s: unknown action %q", path, opName, op.Action)
		}
		for _, mr := range op.Messages {
			chKey, ok := strings.CutPrefix(mr.Ref, "#/channels/"+channelKey+"/messages/")
			if !ok {
				return nil, fmt.Errorf("%s: operation %s: message ref %q is not a message of the channel", path, opName, mr.Ref)
			}
			cm, ok := channel.Messages[chKey]
			if !ok {
				return nil, fmt.Errorf("%s: operation %s: channel has no message %q", path, opName, chKey)
			}
			compKey, ok := strings.CutPrefix(cm.Ref, "#/components/messages/")
			if !ok {
				return nil, fmt.Errorf("%s: channel message %s: ref %q is not a component message", path, chKey, cm.Ref)
			}
			comp, ok := doc.Components.Messages[compKey]
			if !ok {
				return nil, fmt.Errorf("%s: no component message %q", path, compKey)
			}
			if seen[compKey] {
				return nil, fmt.Errorf("%s: message %s is used by more than one operation", path, compKey)
			}
			seen[compKey] = true
			if comp.Payload.Ref == "" || strings.Contains(comp.Payload.Ref, "#") {
				return nil, fmt.Errorf("%s: message %s: payload must be a $ref to a schema file", path, compKey)
			}
			payload, err := l.load(filepath.Join(filepath.Dir(path), comp.Payload.Ref))
			if err != nil {
				return nil, err
			}
			m := &Message{Key: compKey, Name: comp.Name, Summary: comp.Summary, Direction: dir, Payload: payload}
			tp := payload.Prop("type")
			if tp == nil || !tp.Resolve().HasConst || !payload.IsRequired("type") {
				return nil, fmt.Errorf("%s: message %s: payload needs a required \"type\" property with a const", path, compKey)
			}
			wt, ok := tp.Resolve().Const.(string)
			if !ok {
				return nil, fmt.Errorf("%s: message %s: type const must be a string", path, compKey)
			}
			m.WireType = wt
			if dir == Inbound {
				inbound = append(inbound, m)
			} else {
				outbound = append(outbound, m)
			}
		}
	}
	for _, dir := range [][]*Message{inbound, outbound} {
		types := map[string]string{}
		for _, m := range dir {
			if other, dup := types[m.WireType]; dup {
				return nil, fmt.Errorf("%s: messages %s and %s share the type %q in one direction", path, other, m.Key, m.WireType)
			}
			types[m.WireType] = m.Key
		}
	}
	for k := range doc.Components.Messages {
		if !seen[k] {
			return nil, fmt.Errorf("%s: component message %s is in no operation", path, k)
		}
	}
	api.Messages = append(inbound, outbound...)
	return api, nil
}
