"""The guarded email assistant again, with ReviewedChat running the agent loop for you.

ReviewedChat calls the model, runs the free tools, pauses at guarded ones and keeps the
history; you only answer its pending reviews. With OPENAI_API_KEY (or OPENAI_BASE_URL for
a local server) it uses that model; without, toolguard's offline demo model, so try:
"email alice that the meeting moved to 11", then reject with "send it to bob instead".
"""

import json
import os

from toolguard import ChatModel, ReviewedChat
from toolguard.demo import DemoModel  # the scripted stand-in behind `toolguard demo`


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


def pick_model() -> ChatModel:
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from toolguard.openai import OpenAIChatModel  # noqa: PLC0415 - only with a real model

        return OpenAIChatModel.from_env()
    return DemoModel()


def decide(request) -> dict:
    """Show one approval card and turn the answer into a decision."""
    print(f"-- {request.description}\n{json.dumps(request.args, indent=2)}")
    answer = input("[a]pprove, {json} to edit, or a reason to reject: ")
    if answer == "a":
        return {"type": "approve"}
    if answer.startswith("{"):
        return {"type": "edit", "edited_action": {"name": request.name, "args": json.loads(answer)}}
    return {"type": "reject", "message": answer}


chat = ReviewedChat(pick_model(), [find_contact, send_email])  # send_email is guarded
print(chat.toolset.table())
with chat.blocking() as session:
    thread_id = None
    try:
        while (text := input("you> ")) != "quit":
            turn = session.send_message(text, thread_id)
            thread_id = turn.thread_id
            while turn.pending_review:  # the chat paused: one decision per action
                decisions = [decide(r) for r in turn.pending_review.action_requests]
                turn = session.submit_review(decisions, thread_id)
            print("assistant:", turn.reply)
    except EOFError:
        pass
