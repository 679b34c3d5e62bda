# Copyright: glm.fleet contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The attributes most of the collection's modules share; a module states only where it differs."""

from __future__ import annotations


class ModuleDocFragment:
    # Check mode in full, no diff, any POSIX host: what a module has unless it says otherwise.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""
