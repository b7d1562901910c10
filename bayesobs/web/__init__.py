"""The human-participant web app (``bayesobs serve``) and the jsPsych export."""

from .app import ParticipantServer, running

__all__ = ["ParticipantServer", "running"]
