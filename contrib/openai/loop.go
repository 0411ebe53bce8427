package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// DefaultMaxTurns bounds Run when RunOptions.MaxTurns is zero.
const DefaultMaxTurns = 50

// ErrMaxTurns is returned by Run when the model still calls tools after
// RunOptions.MaxTurns requests.
var ErrMaxTurns = errors.New("openai: the model was still calling tools after the maximum number of turns")

// ResponseCreator creates a response: *responses.ResponseService (the
// Responses field of an openai.Client) is one, and a wrapper that logs,
// retries or meters requests can be another.
type ResponseCreator interface {
	New(ctx context.Context, body responses.ResponseNewParams, opts ...option.RequestOption) (*responses.Response, error)
}

var _ ResponseCreator = (*responses.ResponseService)(nil)

// Step runs the client-executed tool calls among a response's output
// items, in order, and returns the input items that answer them, in the
// same order: a shell_call_output per shell call with a local environment
// (or none), an apply_patch_call_output per apply_patch call, a
// local_shell_call_output per local_shell call. Calls already answered in
// output (a shell call executed in one of OpenAI's containers) and every
// other item are left alone. No call yields no items: the model is done,
// or waits for something other than these tools.
//
// A tool failure the model can act on is in the items; the error is
// non-nil only when the loop cannot go on (ctx ended, the sandbox or its
// transport failed), and the items answered before it are returned with it.
func (t *Tools) Step(ctx context.Context, output []responses.ResponseOutputItemUnion) ([]responses.ResponseInputItemUnionParam, error) {
	answered := map[string]bool{}
	for _, it := range output {
		switch it.Type {
		case "shell_call_output", "apply_patch_call_output", "local_shell_call_output":
			if it.CallID != "" {
				answered[it.CallID] = true
			}
			if it.Type == "local_shell_call_output" && it.ID != "" {
				answered[it.ID] = true
			}
		}
	}
	var items []responses.ResponseInputItemUnionParam
	for _, it := range output {
		if answered[it.CallID] {
			continue
		}
		switch it.Type {
		case "shell_call":
			call := it.AsShellCall()
			if e := call.Environment.Type; e != "" && e != "local" {
				continue // run by OpenAI in a container
			}
			out, err := t.Shell(ctx, call)
			if err != nil {
				return items, err
			}
			items = append(items, responses.ResponseInputItemUnionParam{OfShellCallOutput: &out})
		case "apply_patch_call":
			out, err := t.ApplyPatch(ctx, it.AsApplyPatchCall())
			if err != nil {
				return items, err
			}
			items = append(items, responses.ResponseInputItemUnionParam{OfApplyPatchCallOutput: &out})
		case "local_shell_call":
			out, err := t.LocalShell(ctx, it.AsLocalShellCall())
			if err != nil {
				return items, err
			}
			items = append(items, responses.ResponseInputItemUnionParam{OfLocalShellCallOutput: &out})
		}
	}
	return items, nil
}

// RunOptions configures Run. The zero value is usable.
type RunOptions struct {
	// MaxTurns bounds the requests Run makes (DefaultMaxTurns when zero).
	MaxTurns int
	// NoInstructions leaves the request's instructions as given; by
	// default Tools.Instructions is appended to them on every request.
	NoInstructions bool
	// OnResponse, when set, is called with every response received,
	// before its tool calls run.
	OnResponse func(*responses.Response)
}

// Run drives the model until it stops calling these tools: it creates a
// response from params, runs its tool calls (Step), sends their outputs
// back, and repeats; it returns the last response, whose output holds
// the model's final answer.
//
// The conversation state goes as params say: with params.Conversation
// set, the outputs are sent to the same conversation; with params.Store
// explicitly false, every request carries the whole transcript (the
// input, each response's output items, and the tool outputs; ask for
// reasoning.encrypted_content in params.Include when the model reasons);
// otherwise each request names the previous response
// (previous_response_id) and carries only the tool outputs.
//
// A failure to create a response, and the errors of Step, end the run and
// are returned with the last response received (nil before the first).
func (t *Tools) Run(ctx context.Context, rc ResponseCreator, params responses.ResponseNewParams, opts RunOptions) (*responses.Response, error) {
	if rc == nil {
		return nil, errors.New("openai: Run: nil ResponseCreator")
	}
	if opts.MaxTurns < 0 {
		return nil, fmt.Errorf("openai: Run: negative MaxTurns %d", opts.MaxTurns)
	}
	maxTurns := opts.MaxTurns
	if maxTurns == 0 {
		maxTurns = DefaultMaxTurns
	}
	if !opts.NoInstructions {
		instr := t.Instructions()
		if params.Instructions.Valid() && params.Instructions.Value != "" {
			instr = params.Instructions.Value + "\n\n" + instr
		}
		params.Instructions = param.NewOpt(instr)
	}
	stateless := params.Store.Valid() && !params.Store.Value && param.IsOmitted(params.Conversation)
	var transcript []responses.ResponseInputItemUnionParam
	if stateless {
		transcript = inputItems(params.Input)
	}
	var last *responses.Response
	for turn := 1; ; turn++ {
		resp, err := rc.New(ctx, params)
		if err != nil {
			return last, fmt.Errorf("openai: Run: creating response %d: %w", turn, err)
		}
		last = resp
		if opts.OnResponse != nil {
			opts.OnResponse(resp)
		}
		items, err := t.Step(ctx, resp.Output)
		if err != nil {
			return last, err
		}
		if len(items) == 0 {
			return last, nil
		}
		if turn >= maxTurns {
			return last, fmt.Errorf("%w (%d)", ErrMaxTurns, maxTurns)
		}
		switch {
		case stateless:
			for _, it := range resp.Output {
				transcript = append(transcript, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(it.RawJSON())))
			}
			transcript = append(transcript, items...)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: transcript}
		case !param.IsOmitted(params.Conversation):
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
		default:
			params.PreviousResponseID = param.NewOpt(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
		}
	}
}

// inputItems returns the request's input as a list of items.
func inputItems(in responses.ResponseNewParamsInputUnion) []responses.ResponseInputItemUnionParam {
	if in.OfString.Valid() {
		return []responses.ResponseInputItemUnionParam{responses.ResponseInputItemParamOfMessage(in.OfString.Value, responses.EasyInputMessageRoleUser)}
	}
	return append([]responses.ResponseInputItemUnionParam(nil), in.OfInputItemList...)
}
