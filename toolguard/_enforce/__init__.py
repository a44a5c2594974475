"""The enforcement core: one decision per proposed call, quorum reviews, standing grants at work,
the runner.
"""
