"""A plain OpenAI tool-calling loop guarded by toolguard: send_email waits for your approval.

Run with OPENAI_API_KEY, or offline against a local OpenAI-compatible server (Ollama, vLLM):
OPENAI_BASE_URL=http://localhost:11434/v1 TOOLGUARD_MODEL=qwen2.5:7b python examples/openai_loop.py
"""

import json
import os

import openai

from toolguard import Runner, guard


def find_contact(name: str) -> str:
    """Look up the email address of a contact by first name."""
    return f"{name.lower()}@example.com"


def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    return f"Sent {subject!r} to {to}"


runner = Runner(guard([find_contact, send_email]))  # 'send' is an approval verb: send_email waits
client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "not-needed")
model, tools = os.environ.get("TOOLGUARD_MODEL", "gpt-4o-mini"), runner.toolset.openai_tools()
messages: list[dict] = [{"role": "user", "content": input("you> ") or "Mail Alice: we meet at 11"}]
while True:
    reply = client.chat.completions.create(model=model, messages=messages, tools=tools)
    msg = reply.choices[0].message
    if not msg.tool_calls:
        print("assistant:", msg.content)
        break
    step = runner.run_sync(msg.tool_calls)  # reads run now; guarded calls pause
    while step.pending:
        decisions = []
        for request in step.pending.pending_review.action_requests:
            print(f"{request.name} {json.dumps(request.args, indent=2)}")
            answer = input("[a]pprove, {json} to edit, or a reason to reject: ")
            if answer == "a":
                decisions.append({"type": "approve"})
            elif answer.startswith("{"):
                edited = {"name": request.name, "args": json.loads(answer)}
                decisions.append({"type": "edit", "edited_action": edited})
            else:
                decisions.append({"type": "reject", "message": answer})
        step = runner.resume_sync(step.pending, decisions)
    # The calls as they ran (edits included) + one tool message each; rejections are marked.
    messages += step.openai_messages(msg.content)
