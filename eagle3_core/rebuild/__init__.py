"""The token-exact reconstruction of a generated turn, below generate (its pre-flight) and reconstruct.

``build.Reconstructor`` turns generation records into ``input_ids`` and ``loss_mask`` rows, with the
server's ids as the truth where they exist (``layout``, ``history``, ``text_rules``). The reconstruct
stage runs it over ``generations/``; the pre-flight runs it on a live server's answers.
"""
