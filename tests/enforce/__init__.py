"""The enforcement core: the runner, quorum, standing grants, the judge."""
