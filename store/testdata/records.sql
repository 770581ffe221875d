-- A small site: 12 patients, 6 treated. Loaded by the tests into a fresh
-- file. patient_id has no constraint, so that tests can make it NULL or
-- duplicate; visit is a DATE column holding text, which is not a covariate.
CREATE TABLE records (
    patient_id INTEGER,
    age        REAL,
    smoker     INTEGER,
    bmi        REAL,
    note       TEXT,
    visit      DATE,
    treated    INTEGER,
    outcome    REAL,
    recovered  INTEGER
);
INSERT INTO records VALUES
    (1,  34.0, 0, 22.1, 'first visit', '2024-01-05', 1, 3.25, 1),
    (2,  51.5, 1, 27.4, NULL,          '2024-01-06', 0, 1.5,  0),
    (3,  47.0, 0, 24.9, 'follow-up',   '2024-01-06', 1, 2.75, 1),
    (4,  29.0, 1, 31.2, NULL,          '2024-01-07', 0, 0.5,  0),
    (5,  62.0, 0, 26.0, NULL,          '2024-01-09', 1, 4.0,  1),
    (6,  38.5, 0, 23.3, 'referred',    '2024-01-10', 0, 1.0,  0),
    (7,  44.0, 1, 29.9, NULL,          '2024-01-10', 1, 3.5,  1),
    (8,  57.0, 1, 25.5, NULL,          '2024-01-11', 0, 2.0,  1),
    (9,  23.0, 0, 21.0, NULL,          '2024-01-12', 1, 2.5,  0),
    (10, 66.5, 1, 28.8, 'second',      '2024-01-13', 0, 0.75, 0),
    (11, 41.0, 0, 22.7, NULL,          '2024-01-14', 1, 3.0,  1),
    (12, 35.0, 1, 30.1, NULL,          '2024-01-15', 0, 1.25, 0);
