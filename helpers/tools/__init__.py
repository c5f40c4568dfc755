"""The course's tools over its notebooks: what builds and checks the course, not what a chapter
calls (that is helpers/chapters/, which these import; nothing in a notebook imports these).

    execute         re-execute notebooks in place (./course execute)
    editions        the student edition, no answers (./course student)
    site            the HTML book (./course site)
    lab_times       class times measured on the student edition (INSTRUCTORS.md's table)
    folders         what a command may write into (nothing a user made is overwritten)
    needs           packages beyond the course's that a test or a notebook needs: skipped where
                    missing, failed under COURSE_CI=1 (also a pytest plugin: skips a notebook that needs one)
"""
