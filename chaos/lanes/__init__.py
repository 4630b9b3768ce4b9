"""Lanes: `chaos run --lanes N`, a run's experiments side by side, one child process and one stack per lane.

    launch.py   the parent: which experiments share the lanes and which run alone after them, the lanes' child
                processes started, waited for and stopped
    queue.py    the one-node experiments the lanes take as they get free; those that restart processes, one at a time
    gate.py     the lanes' turns: one lane at a time starts its job and runs its steady phase
"""
